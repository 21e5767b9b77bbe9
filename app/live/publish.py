"""Badge events over Redis pub/sub: hints after a commit; the socket side recomputes the count.

Pub/sub is fire-and-forget, so a message carries no state: it only says "recount for this user"
(or "recount for everyone" after an announcement). Losing one loses nothing but latency.
Services register them as effects of their transaction (badge_after_commit, broadcast_after_commit);
they go out only if it commits, merged with other commits' events by the dispatcher.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from redis.exceptions import RedisError

from app.extensions import redis
from app.live.presence import online_user_ids
from app.unitofwork import Effect, after_commit

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


@dataclass(frozen=True)
class BadgeEvent(Effect):
    """Tell these users' sockets to recount (with a toast title for new notifications).

    online_only: publish only for users with a live socket (bulk producers: a campaign reaches
    many users, few of whom are looking).
    """

    user_ids: frozenset[int]
    toast_title: str | None = None
    online_only: bool = False

    def merge_key(self):
        return ("badge", self.toast_title, self.online_only)

    def merge(self, other: BadgeEvent) -> BadgeEvent:
        return BadgeEvent(self.user_ids | other.user_ids, self.toast_title, self.online_only)

    def run(self) -> frozenset[int]:
        ids = online_user_ids(self.user_ids) if self.online_only else self.user_ids
        toast = {"title": self.toast_title} if self.toast_title else None
        return frozenset(ids) if ids and publish_badge(ids, toast=toast) else frozenset()

    def count(self, result: object) -> dict[str, int]:
        return {"badges": len(self.user_ids & result)} if result else {}


@dataclass(frozen=True)
class Broadcast(Effect):
    """Tell every socket to recount (announcements changed)."""

    def merge_key(self):
        return ("broadcast",)

    def merge(self, other: Broadcast) -> Broadcast:
        return self

    def run(self) -> bool:
        return publish_broadcast()

    def count(self, result: object) -> dict[str, int]:
        return {"broadcasts": 1} if result else {}


def badge_after_commit(user_ids: Iterable[int], toast_title: str | None = None, online_only: bool = False) -> None:
    """Publish a badge event for these users once the current transaction commits."""
    ids = frozenset(int(user_id) for user_id in user_ids)
    if ids:
        after_commit(BadgeEvent(ids, toast_title, online_only))


def broadcast_after_commit() -> None:
    """Tell every socket to recount once the current transaction commits."""
    after_commit(Broadcast())
