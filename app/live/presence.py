"""Who is online: one Redis sorted set (realtime store) of user id -> last time a tab of theirs answered.

"Online" is a socket that acks (app/realtime/acks.py), not merely one that is open: a web process marks a
user at their socket's first ack, then every TTL/3 seconds refreshes the users whose sockets acked within
the TTL (quiet sockets are pinged to ack). A frozen tab stops acking and ages out, so it no longer
suppresses e-mail or push (skip_when_online). Nobody removes a user on disconnect (another process may
still hold a socket for them); they simply age out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from itertools import chain

import redis as redis_lib
from flask import current_app

from app import keyspace
from app.extensions import REALTIME_ERRORS, redis

log = logging.getLogger(__name__)

CHUNK = 1000


def presence_key(config: Mapping | None = None) -> str:
    """Return the sorted set of user id -> last heartbeat."""
    return keyspace.key("presence", config=config)


def ttl_seconds() -> float:
    """Return how long a heartbeat keeps a user online."""
    return float(current_app.config["PRESENCE_TTL_SECONDS"])


def _chunks(items: list, size: int = CHUNK):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def touch(
    client: redis_lib.Redis,
    user_ids: Iterable[int],
    ttl: float,
    now: float | None = None,
    config: Mapping | None = None,
) -> None:
    """Mark these users as seen now and forget heartbeats older than ttl (raises RedisError)."""
    key = presence_key(config)
    now = time.time() if now is None else now
    ids = sorted({int(user_id) for user_id in user_ids})
    with client.pipeline(transaction=False) as pipe:
        for chunk in _chunks(ids):
            pipe.zadd(key, {user_id: now for user_id in chunk})
        pipe.zremrangebyscore(key, "-inf", f"({now - ttl}")
        if ids:
            # If every web process dies the whole set expires instead of lingering.
            pipe.expire(key, int(ttl) + 1)
        pipe.execute()


def online_user_ids(user_ids: Iterable[int]) -> set[int]:
    """Return the subset of user_ids with a live socket in some web process (empty if Redis is down)."""
    ids = list(dict.fromkeys(int(user_id) for user_id in user_ids))
    if not ids:
        return set()
    cutoff = time.time() - ttl_seconds()
    key = presence_key()
    try:
        with redis.realtime().pipeline(transaction=False) as pipe:
            for chunk in _chunks(ids):
                pipe.zmscore(key, chunk)
            scores = chain.from_iterable(pipe.execute())
    except REALTIME_ERRORS as exc:
        # Without Redis there is no pub/sub either, so nobody could be told anyway.
        log.warning("presence lookup failed: %s", exc)
        return set()
    return {user_id for user_id, score in zip(ids, scores, strict=True) if score is not None and score >= cutoff}
