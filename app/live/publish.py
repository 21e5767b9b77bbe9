"""Badge events, routed: a hint after a commit goes only to the web processes (nodes) holding the users' sockets.

A message carries no count: it says "recount for these users" (or "recount for everyone" after an
announcement, on the one broadcast channel every node hears). The registry (app/live/registry.py) says
which node holds which user; each node listens on its own channel only (sharded pub/sub on a Redis
Cluster), so no process reads events for sockets it does not hold. Losing a message loses nothing but
latency: the frame's ack is missing, and a reconnect recounts.
Services register events as effects of their transaction (badge_after_commit, broadcast_after_commit);
they go out only if it commits, merged with other commits' events by the dispatcher.
Close instructions travel the same way to the nodes holding the user: "close" (sockets over the
per-user cap, 4008) and "session-end" (sockets of a signed-out session, 4001).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app import keyspace, telemetry
from app.extensions import REALTIME_ERRORS, is_cluster, redis
from app.live import registry
from app.unitofwork import Effect, after_commit

log = logging.getLogger(__name__)

# A campaign may reach many users on one node; bound one message's size.
NODE_MESSAGE_USERS = 1000
TOAST_TITLE_MAX = 200
# Close codes (4000-4999 are the application's): the browser must not reconnect after either.
CLOSE_SIGNED_OUT = 4001
CLOSE_TOO_MANY_SOCKETS = 4008


def broadcast_channel(config: Mapping | None = None) -> str:
    """Return the pub/sub channel that makes every socket recount (every node subscribes to it)."""
    return keyspace.key("badge", "all", config=config)


def event_message(toast: dict | None = None) -> str:
    """Return the JSON message a broadcast carries (a toast title at most, never the count)."""
    if toast and toast.get("title"):
        return json.dumps({"kind": "badge", "toast": {"title": str(toast["title"])[:TOAST_TITLE_MAX]}})
    return json.dumps({"kind": "badge"})


def _send(client, node_id: str, message: dict) -> None:
    """Publish message on node_id's channel (sharded pub/sub on a cluster: only that channel's shard hears it)."""
    body = json.dumps(message, separators=(",", ":"))
    if is_cluster(client):
        client.spublish(registry.node_channel(node_id), body)
    else:
        client.publish(registry.node_channel(node_id), body)


def route_badge(
    user_ids: Iterable[int],
    toast: dict | None = None,
    notifications: Mapping[int, Iterable[int]] | None = None,
    accepted_at: float | None = None,
    trace: str | None = None,
) -> set[int] | None:
    """Tell the nodes holding these users' sockets to resend their badge; return the users with a socket.

    One registry lookup for the batch, then one message per node (per NODE_MESSAGE_USERS users) naming its
    users: a process hears only events for its own sockets, and users with no socket cost only the lookup.
    notifications: user id -> the notification ids this event shows them (their acks are recorded, for
    push_when_offline); accepted_at: when the API accepted it (epoch seconds, for the 202-to-ack histogram);
    trace: a traceparent to continue (else the current trace's); the publish is a span, and the frames
    continue it (their span ends at the client's ack). None when Redis is unreachable.
    """
    notifications = notifications or {}
    ids = sorted({int(user_id) for user_id in user_ids})
    with telemetry.span("hato.realtime.publish", trace, kind="producer", **{"hato.users": len(ids)}) as span:
        trace = telemetry.traceparent() or trace  # the frames continue this span's trace
        try:
            client = redis.realtime()
            routes = registry.nodes_of(client, ids)
            for node_id, users in routes.items():
                for start in range(0, len(users), NODE_MESSAGE_USERS):
                    _send(client, node_id, _badge_message(users[start : start + NODE_MESSAGE_USERS], toast,
                                                          notifications, accepted_at, trace))  # fmt: skip
        except REALTIME_ERRORS as exc:
            log.warning("badge publish failed (clients resync on reconnect): %s", exc)
            telemetry.failed(span, "the realtime store is unreachable")
            return None
        span.set_attribute("hato.nodes", len(routes))
    return {user_id for users in routes.values() for user_id in users}


def _badge_message(
    users: list[int],
    toast: dict | None,
    notifications: Mapping[int, Iterable[int]],
    accepted_at: float | None,
    trace: str | None,
) -> dict:
    """The message for one node: its users, the toast, what each is shown, when it was accepted, the trace."""
    message: dict = {"kind": "badge", "users": users}
    if toast and toast.get("title"):
        message["toast"] = {"title": str(toast["title"])[:TOAST_TITLE_MAX]}
        if type(toast.get("tenant")) is int:  # a tenant's notification: scoped feeds of other tenants never see it
            message["toast"]["tenant"] = toast["tenant"]
    shown = {str(u): sorted(int(n) for n in notifications[u]) for u in users if notifications.get(u)}
    if shown:
        message["n"] = shown
    if accepted_at is not None:
        message["t"] = round(accepted_at, 6)
    if trace:
        message["tp"] = trace
    return message


def publish_badge(user_ids: Iterable[int], toast: dict | None = None) -> bool:
    """Tell the processes holding sockets of these users to resend their badge; False if Redis is down."""
    return route_badge(user_ids, toast) is not None


def publish_broadcast() -> bool:
    """Tell every socket to recount (an announcement was published or changed)."""
    try:
        redis.realtime().publish(broadcast_channel(), event_message())
    except REALTIME_ERRORS as exc:
        log.warning("broadcast publish failed: %s", exc)
        return False
    return True


def _publish_control(user_id: int, message: dict, nodes: Iterable[str] | None = None) -> bool:
    """Send a close instruction to the nodes holding user_id's sockets (or to the given nodes)."""
    try:
        client = redis.realtime()
        targets = set(nodes) if nodes is not None else set(registry.nodes_of(client, [user_id]))
        for node_id in sorted(targets):
            _send(client, node_id, {**message, "user": int(user_id)})
    except REALTIME_ERRORS as exc:
        log.warning("socket close instruction for user %s not published: %s", user_id, exc)
        return False
    return True


def publish_close(user_id: int, socket_ids: Iterable[str]) -> bool:
    """Tell whichever process holds these sockets of user_id to close them (4008: over the cap)."""
    ids = sorted(socket_ids)
    nodes = {registry.node_of(socket_id) for socket_id in ids} - {None}
    return bool(ids) and _publish_control(user_id, {"kind": "close", "sockets": ids}, nodes)


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

    notifications: (user id, notification id) pairs the event shows (their acks are recorded);
    accepted_at: when the first merged event was accepted. Its publish span runs inside the dispatcher's
    after-commit span, which continues the first merged request's trace and links the others'.
    """

    user_ids: frozenset[int]
    toast_title: str | None = None
    notifications: frozenset[tuple[int, int]] = frozenset()
    accepted_at: float | None = None
    toast_tenant: int | None = None  # the notifications' tenant (issue 32): the toast shows only in its scope

    def merge_key(self):
        return ("badge", self.toast_title, self.toast_tenant)

    def merge(self, other: BadgeEvent) -> BadgeEvent:
        times = [t for t in (self.accepted_at, other.accepted_at) if t is not None]
        return BadgeEvent(
            self.user_ids | other.user_ids,
            self.toast_title,
            self.notifications | other.notifications,
            min(times) if times else None,
            self.toast_tenant,
        )

    def run(self) -> frozenset[int]:
        toast = {"title": self.toast_title} if self.toast_title else None
        if toast is not None and self.toast_tenant is not None:
            toast["tenant"] = self.toast_tenant
        shown: dict[int, list[int]] = {}
        for user_id, notification_id in self.notifications:
            shown.setdefault(user_id, []).append(notification_id)
        reached = route_badge(self.user_ids, toast, shown, self.accepted_at)
        return frozenset(reached or ())

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


def badge_after_commit(
    user_ids: Iterable[int],
    toast_title: str | None = None,
    notifications: Iterable[tuple[int, int]] = (),
    toast_tenant: int | None = None,
) -> None:
    """Publish a badge event for these users once the current transaction commits.

    notifications: the (user id, notification id) pairs it shows, so that the members' acks are recorded;
    toast_tenant: their tenant, so that a feed scoped to another tenant shows no toast of them.
    """
    ids = frozenset(int(user_id) for user_id in user_ids)
    if ids:
        pairs = frozenset((int(u), int(n)) for u, n in notifications)
        after_commit(BadgeEvent(ids, toast_title, pairs, time.time(), toast_tenant))


def broadcast_after_commit() -> None:
    """Tell every socket to recount once the current transaction commits."""
    after_commit(Broadcast())
