"""Badge events over Redis pub/sub: hints after a commit; the socket side recomputes the count.

Pub/sub is fire-and-forget, so a message carries no state: it only says "recount for this user"
(or "recount for everyone" after an announcement). Losing one loses nothing but latency.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from redis.exceptions import RedisError

from app.extensions import redis

log = logging.getLogger(__name__)

USER_CHANNEL_PREFIX = "hato:badge:user:"
BROADCAST_CHANNEL = "hato:badge:all"


def user_channel(user_id: int) -> str:
    """Return the pub/sub channel for one user's badge."""
    return f"{USER_CHANNEL_PREFIX}{user_id}"


def publish_badge(user_ids: Iterable[int], toast: dict | None = None) -> bool:
    """Tell every process holding a socket for these users to resend their badge; False if Redis is down."""
    message = json.dumps({"kind": "badge", "toast": toast} if toast else {"kind": "badge"})
    try:
        with redis.client().pipeline(transaction=False) as pipe:
            for user_id in set(user_ids):
                pipe.publish(user_channel(user_id), message)
            pipe.execute()
    except RedisError as exc:
        log.warning("badge publish failed (clients resync on reconnect): %s", exc)
        return False
    return True


def publish_broadcast() -> bool:
    """Tell every socket to recount (an announcement was published or changed)."""
    try:
        redis.client().publish(BROADCAST_CHANNEL, json.dumps({"kind": "badge"}))
    except RedisError as exc:
        log.warning("broadcast publish failed: %s", exc)
        return False
    return True
