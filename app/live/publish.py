"""Badge events over Redis pub/sub: hints after a commit; the socket side recomputes the count.

Pub/sub is fire-and-forget, so a message carries no state: it only says "recount for this user"
(or "recount for everyone" after an announcement). Losing one loses nothing but latency.
Services register them as effects of their transaction (badge_after_commit, broadcast_after_commit);
they go out only if it commits, merged with other commits' events by the dispatcher.
Close instructions travel on the same user channel (the hub's one listener already hears it): "close"
(sockets over the per-user cap, 4008) and "session-end" (sockets of a signed-out session, 4001).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from redis.exceptions import RedisError

from app import keyspace
from app.extensions import redis
from app.live.presence import online_user_ids
from app.unitofwork import Effect, after_commit

log = logging.getLogger(__name__)

# A campaign may publish for many users; bound each pipeline's buffered replies.
PIPELINE_CHUNK = 1000
TOAST_TITLE_MAX = 200
# Close codes (4000-4999 are the application's): the browser must not reconnect after either.
CLOSE_SIGNED_OUT = 4001
CLOSE_TOO_MANY_SOCKETS = 4008


def user_channel(user_id: int | str, config: Mapping | None = None) -> str:
    """Return the pub/sub channel for one user's badge (`*` for the pattern of all of them)."""
    return keyspace.key("badge", "user", user_id, config=config)


def broadcast_channel(config: Mapping | None = None) -> str:
    """Return the pub/sub channel that makes every socket recount."""
    return keyspace.key("badge", "all", config=config)


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
        prefix = user_channel("")
        for start in range(0, len(ids), PIPELINE_CHUNK):
            with client.pipeline(transaction=False) as pipe:
                for user_id in ids[start : start + PIPELINE_CHUNK]:
                    pipe.publish(prefix + str(user_id), message)
                pipe.execute()
    except RedisError as exc:
        log.warning("badge publish failed (clients resync on reconnect): %s", exc)
        return False
    return True


def publish_broadcast() -> bool:
    """Tell every socket to recount (an announcement was published or changed)."""
    try:
        redis.client().publish(broadcast_channel(), event_message())
    except RedisError as exc:
        log.warning("broadcast publish failed: %s", exc)
        return False
    return True


def _publish_control(user_id: int, message: dict) -> bool:
    try:
        redis.client().publish(user_channel(user_id), json.dumps(message))
    except RedisError as exc:
        log.warning("socket close instruction for user %s not published: %s", user_id, exc)
        return False
    return True


def publish_close(user_id: int, socket_ids: Iterable[str]) -> bool:
    """Tell whichever process holds these sockets of user_id to close them (4008: over the cap)."""
    ids = sorted(socket_ids)
    return bool(ids) and _publish_control(user_id, {"kind": "close", "sockets": ids})


def publish_session_end(
    user_id: int, *, sid: str | None = None, below_version: int | None = None, keep_sid: str | None = None
) -> bool:
    """Close user_id's sockets of a signed-out session (4001).

    sid: that one session (sign-out); below_version: every session stamped with an older version,
    except keep_sid (sign out everywhere, password or role change).
    """
    message: dict = {"kind": "session-end"}
    if sid is not None:
        message["sid"] = sid
    if below_version is not None:
        message.update(below=int(below_version), keep=keep_sid)
    return _publish_control(user_id, message)


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


@dataclass(frozen=True)
class SessionEnd(Effect):
    """Close the user's sockets of sessions older than below_version, except keep_sid's."""

    user_id: int
    below_version: int
    keep_sid: str | None = None

    def merge_key(self):
        return ("session-end", self.user_id)

    def merge(self, other: SessionEnd) -> SessionEnd:
        # The newer version ends every older session; a kept session stays only if both kept it.
        keep = self.keep_sid if self.keep_sid == other.keep_sid else None
        return SessionEnd(self.user_id, max(self.below_version, other.below_version), keep)

    def run(self) -> bool:
        return publish_session_end(self.user_id, below_version=self.below_version, keep_sid=self.keep_sid)


def session_end_after_commit(user_id: int, below_version: int, keep_sid: str | None = None) -> None:
    """Close the user's sockets of older sessions once the current transaction commits."""
    after_commit(SessionEnd(int(user_id), int(below_version), keep_sid))


def badge_after_commit(user_ids: Iterable[int], toast_title: str | None = None, online_only: bool = False) -> None:
    """Publish a badge event for these users once the current transaction commits."""
    ids = frozenset(int(user_id) for user_id in user_ids)
    if ids:
        after_commit(BadgeEvent(ids, toast_title, online_only))


def broadcast_after_commit() -> None:
    """Tell every socket to recount once the current transaction commits."""
    after_commit(Broadcast())
