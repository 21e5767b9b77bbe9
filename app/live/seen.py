"""Which notifications a member's open tab acked: what push_when_offline asks before a push goes.

One sorted set per user (notification id -> ack time), with the user's hash tag (app/live/registry.py);
it keeps the newest KEEP_PER_USER for KEEP_SECONDS, far longer than any push waits for an ack.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

import redis as redis_lib

from app import keyspace
from app.extensions import REALTIME_ERRORS, redis

log = logging.getLogger(__name__)

KEEP_SECONDS = 86_400
KEEP_PER_USER = 1000
CHUNK = 1000


def acked_key(user_id: int, config: Mapping | None = None) -> str:
    """Return the key of one user's acked notification ids."""
    return keyspace.tagged(f"u{int(user_id)}", "acked", config=config)


def record(
    client: redis_lib.Redis, user_id: int, notification_ids: Iterable[int], config: Mapping | None = None
) -> None:
    """Record that user_id's tab showed (acked) these notifications; raises RedisError."""
    ids = {int(n) for n in notification_ids}
    if not ids:
        return
    key = acked_key(user_id, config)
    with client.pipeline(transaction=False) as pipe:
        pipe.zadd(key, dict.fromkeys(ids, time.time()))
        pipe.zremrangebyrank(key, 0, -KEEP_PER_USER - 1)
        pipe.expire(key, KEEP_SECONDS)
        pipe.execute()


def acked(
    client: redis_lib.Redis, pairs: Iterable[tuple[int, int]], config: Mapping | None = None
) -> set[tuple[int, int]]:
    """Return the (user id, notification id) pairs some tab of the user acked; raises RedisError."""
    pairs = list(dict.fromkeys((int(u), int(n)) for u, n in pairs))
    found = set()
    for start in range(0, len(pairs), CHUNK):
        chunk = pairs[start : start + CHUNK]
        with client.pipeline(transaction=False) as pipe:
            for user_id, notification_id in chunk:
                pipe.zscore(acked_key(user_id, config), notification_id)
            scores = pipe.execute()
        found.update(pair for pair, score in zip(chunk, scores, strict=True) if score is not None)
    return found


def shown_in_a_tab(pairs: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
    """The (user id, notification id) pairs a tab of the user acked; none when the realtime store is away.

    Failing open: without the store nobody can tell whether a tab showed it, so the push goes.
    """
    try:
        return acked(redis.realtime(), pairs)
    except REALTIME_ERRORS as exc:
        log.warning("acks unavailable, pushes go: %s", exc)
        return set()
