"""Badge events over Redis pub/sub: hints after a commit; the socket side recomputes the count.

Pub/sub is fire-and-forget, so a message carries no state: it only says "recount for this user"
(or "recount for everyone" after an announcement). Losing one loses nothing but latency.
Producers call these after their commit, never inside a service.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from redis.exceptions import RedisError

from app.extensions import redis

log = logging.getLogger(__name__)

USER_CHANNEL_PREFIX = "hato:badge:user:"
USER_CHANNEL_PATTERN = USER_CHANNEL_PREFIX + "*"
BROADCAST_CHANNEL = "hato:badge:all"
# A campaign may publish for many users; bound each pipeline's buffered replies.
PIPELINE_CHUNK = 1000
TOAST_TITLE_MAX = 200


def user_channel(user_id: int) -> str:
    """Return the pub/sub channel for one user's badge."""
    return f"{USER_CHANNEL_PREFIX}{user_id}"


def event_message(toast: dict | None = None) -> str:
    """Return the JSON message a badge event carries (a toast title at most, never the count)."""
    if toast and toast.get("title"):
        return json.dumps({"kind": "badge", "toast": {"title": str(toast["title"])[:TOAST_TITLE_MAX]}})
    return json.dumps({"kind": "badge"})


def publish_badge(user_ids: Iterable[int], toast: dict | None = None) -> bool:
    """Tell every process holding a socket for these users to resend their badge; False if Redis is down."""
    message = event_message(toast)
    ids = sorted({int(user_id) for user_id in user_ids})
    try:
        client = redis.client()
        for start in range(0, len(ids), PIPELINE_CHUNK):
            with client.pipeline(transaction=False) as pipe:
                for user_id in ids[start : start + PIPELINE_CHUNK]:
                    pipe.publish(user_channel(user_id), message)
                pipe.execute()
    except RedisError as exc:
        log.warning("badge publish failed (clients resync on reconnect): %s", exc)
        return False
    return True


def publish_broadcast() -> bool:
    """Tell every socket to recount (an announcement was published or changed)."""
    try:
        redis.client().publish(BROADCAST_CHANNEL, event_message())
    except RedisError as exc:
        log.warning("broadcast publish failed: %s", exc)
        return False
    return True
