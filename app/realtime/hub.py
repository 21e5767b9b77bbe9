"""The per-process websocket hub (a node of the realtime tier): registry, routed events, coalescing, acked frames.

Threads, all started lazily by the first socket (never at import, in create_app, CLI or RQ workers):
- listeners (app/realtime/listener.py) hold the node's own channel and the broadcast channel, and turn
  messages into "user N is dirty": events arrive only for users with a socket here (app/live/publish.py
  routes them through the registry), never by pattern;
- a heartbeat thread refreshes the node's registry entries and presence (users whose tab acked lately); a
  stats thread adds this node's counters to Redis (app/live/nodestats.py);
- a few flushers (REALTIME_FLUSH_THREADS) recount dirty users, at most once per user per
  REALTIME_COALESCE_SECONDS, with a database session only for the length of a batch, and hand the
  rendered frame to that user's sockets (one statement counts both badges, unread and unseen);
- each socket's own handler thread is the only one that writes to it, numbers its frames, reads its
  client's acks and resends the unacked once (app/realtime/acks.py), so a slow client only blocks itself.
Each socket remembers the language its page was served in (at the handshake); a user's frame is counted
once and rendered once per language among their sockets (almost always one), inside force_locale.
One socket, its close codes and which sockets a session event closes live in app/realtime/connection.py;
what a frame says (HTML partials or JSON) in app/realtime/frames.py.
Every socket is registered per user across processes (app/live/registry.py): the one that pushes a
user over WS_MAX_SOCKETS_PER_USER gets the oldest closed (4008) by whichever node holds it, told on that
node's channel; a signed-out session's sockets are closed the same way (4001).
"""

from __future__ import annotations

import atexit
import heapq
import json
import logging
import os
import random
import secrets
import socket
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from flask import Flask
from flask_babel import force_locale
from simple_websocket import ConnectionClosed
from sqlalchemy.exc import SQLAlchemyError

from app import replicas
from app.extensions import REALTIME_ERRORS, db, redis
from app.i18n import language_or_default
from app.inbox import queries
from app.live import nodestats, presence, registry, seen
from app.live.publish import CLOSE_SIGNED_OUT, CLOSE_TOO_MANY_SOCKETS, broadcast_channel, publish_close
from app.realtime import listener
from app.realtime.acks import PING, FrameMeta, parse_ack
from app.realtime.connection import (
    CLOSE_TOKEN_EXPIRED,
    GOING_AWAY,
    INTERNAL_ERROR,
    JSON_FRAMES,
    Connection,
    reader_thread_class,
    scope_of,
    session_ended,
    session_kept,
)
from app.realtime.frames import parse_toast, render_for, toasts_in_scope

log = logging.getLogger(__name__)


def _counts(user_id: int, tenant_id: int | None) -> queries.BadgeCounts:
    """A user's badges, or their part of one tenant's (a scoped feed socket, issue 32)."""
    return queries.badge_counts(user_id) if tenant_id is None else queries.badge_counts(user_id, tenant_id)


def _first_counts(user_id: int, tenant_id: int | None) -> queries.BadgeCounts:
    """The badges of a socket's first frame (a (re)connect): a replica may answer them (app/replicas.py)."""
    return replicas.read(user_id, lambda: _counts(user_id, tenant_id))


FLUSH_BATCH = 50
MAX_TOASTS_PER_FRAME = 5
# Handler threads sleep until woken by a frame, a client message or a close; this is only a backstop.
IDLE_WAKE_SECONDS = 30.0
HEARTBEAT_RETRY_SECONDS = 1.0
RECOUNT_RETRY_SECONDS = 1.0  # a badge count that failed (the database away) is tried again after this
CLOSE_ECHO_SECONDS = 1.0


def node_id_for(config) -> str:
    """Return a new node id for this process: REALTIME_NODE_ID (or the host name), the pid and a random part."""
    prefix = config["REALTIME_NODE_ID"] or socket.gethostname()
    return f"{prefix}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass
class Dirty:
    """A user's recount waiting for its flush: the toasts and notifications it shows, when and in which trace."""

    toasts: list[dict] = field(default_factory=list)
    notifications: set[int] = field(default_factory=set)
    accepted_at: float | None = None
    trace: str | None = None

    def meta(self) -> FrameMeta:
        """What the frame shows, for its ack."""
        return FrameMeta(tuple(sorted(self.notifications)), self.accepted_at, self.trace)


DEFAULTS = {
    # Sockets are pinged every 25 s and dropped when the pong does not come back in time; one shared
    # thread reads them all (app/realtime/connection.py SharedReader).
    "SOCK_SERVER_OPTIONS": {"ping_interval": 25, "max_message_size": 4096, "thread_class": reader_thread_class()},
}

_hubs: weakref.WeakSet[Hub] = weakref.WeakSet()


class Hub:
    """Local sockets by user, the dirty-user schedule, and the threads that serve them."""

    def __init__(self, app: Flask, clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self._clock = clock  # seconds; coalescing windows are measured on it (tests pass their own)
        self._cond = threading.Condition()
        self._conns: dict[int, set[Connection]] = {}
        self._pending: dict[int, Dirty] = {}
        self._due: list[tuple[float, int]] = []
        self._last_flush: dict[int, float] = {}
        self._threads: list[threading.Thread] = []
        self._pid: int | None = None
        self._stopping = threading.Event()
        self.listening = threading.Event()
        self._beat = threading.Event()
        self.node_id: str | None = None  # set when the threads start (after gunicorn's fork)
        self.stats = nodestats.NodeStats()
        self._presence_touched: dict[int, float] = {}
        self._strays: set[Connection] = set()  # sockets whose registration failed (the store was away)
        _hubs.add(self)

    # --- registry -------------------------------------------------------------------------------

    def connect(
        self,
        user_id: int,
        ws,
        sid: str | None = None,
        ver: int | None = None,
        language: str | None = None,
        feed: tuple[float, Callable[[Connection, str], None] | None] | None = None,
        device: str | None = None,
        tenant_id: int | None = None,
    ) -> Connection:
        """Register a socket (before its first count, so no event can slip between) and start the threads.

        It is counted against the user's cap across processes; the oldest sockets over the cap are closed.
        language is the one its frames speak (the page's); None means DEFAULT_LOCALE's. feed, for a socket
        authenticated by a user token: (its expiry in epoch seconds, the handler of its client's messages).
        device: the client's device id, kept in the registry beside the node. The user counts as online
        (presence) once the socket acks its first frame, not before. tenant_id: a feed socket scoped to a tenant,
        whose counts and toasts are that tenant's (issue 32).
        """
        conn = Connection(user_id, ws, sid, ver, language or self._default_language(), self._ack_timeout())
        conn.device = device
        conn.tenant_id = tenant_id
        conn.outbox.ping_every = self._ttl() / 3
        conn.outbox.ping_at = conn.opened + conn.outbox.ping_every * random.uniform(0.5, 1.0)  # noqa: S311 - spreads timers
        if feed is not None:
            conn.json, (conn.expires_at, conn.on_message) = True, feed
        self.ensure_started()
        with self._cond:
            if self._stopping.is_set():
                conn.close(GOING_AWAY)  # this process is going away: reconnect elsewhere
            self._conns.setdefault(user_id, set()).add(conn)
        self.stats.add("connects")
        self._count(conn)
        return conn

    def _store(self):
        return redis.realtime(self.app.config)

    def _register(self, conn: Connection) -> None:
        """Register conn on this node under its user and close what it pushed over the cap; raises REALTIME_ERRORS."""
        conn.socket_id, evicted = registry.register(
            self._store(), conn.user_id, self.node_id, self._max_sockets(), self._ttl(), conn.device, self.app.config
        )
        if evicted:
            # The holder may be this node or another: each evicted id names its node.
            publish_close(conn.user_id, evicted)

    def _count(self, conn: Connection) -> None:
        """Register conn; while the store is away, cap this process's sockets only and leave conn to the heartbeat."""
        try:
            self._register(conn)
        except REALTIME_ERRORS as exc:
            # Without Redis the cap holds per process only (and no process hears another anyway).
            log.warning("socket count failed, capping this process only: %s", exc)
            with self._cond:
                self._strays.add(conn)  # the heartbeat registers it once the store is back
                local = sorted(self._conns.get(conn.user_id, ()), key=lambda c: c.opened)
            for old in local[: max(0, len(local) - self._max_sockets())]:
                self._close(old, CLOSE_TOO_MANY_SOCKETS)

    def close_where(self, user_id: int, predicate: Callable[[Connection], bool], code: int) -> int:
        """Close this process's sockets of user_id that match predicate with code; return how many."""
        with self._cond:
            targets = [conn for conn in self._conns.get(user_id, ()) if predicate(conn)]
        for conn in targets:
            self._close(conn, code)
        return len(targets)

    def _close(self, conn: Connection, code: int) -> None:
        if not conn.close(code) and conn.ws.connected:
            # A write is stuck (a dead peer): end the TCP connection so the handler thread lets go.
            try:
                conn.ws.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def disconnect(self, conn: Connection) -> None:
        """Forget a closed socket."""
        conn.stop_reading()
        with self._cond:
            conns = self._conns.get(conn.user_id)
            if conns is not None:
                conns.discard(conn)
                if not conns:
                    del self._conns[conn.user_id]
                    self._last_flush.pop(conn.user_id, None)
                    self._presence_touched.pop(conn.user_id, None)
            self._cond.notify_all()
        self.stats.add("disconnects")
        conn.outbox.forget()
        if conn.socket_id is not None:
            try:
                registry.unregister(self._store(), conn.user_id, conn.socket_id, self.app.config)
            except REALTIME_ERRORS as exc:
                log.warning("socket uncount failed (it ages out): %s", exc)

    def socket_count(self) -> int:
        """Return how many sockets this process holds."""
        with self._cond:
            return sum(len(conns) for conns in self._conns.values())

    def local_user_ids(self) -> list[int]:
        """Return the users with a socket in this process."""
        with self._cond:
            return list(self._conns)

    def local_socket_ids(self) -> dict[int, list[str]]:
        """Return user id -> the counted socket ids this process holds (for the heartbeat)."""
        with self._cond:
            held = {
                user_id: [conn.socket_id for conn in conns if conn.socket_id is not None]
                for user_id, conns in self._conns.items()
            }
        return {user_id: ids for user_id, ids in held.items() if ids}

    # --- events ---------------------------------------------------------------------------------

    def notify(
        self,
        user_id: int,
        toast: dict | None = None,
        notifications: list[int] | tuple = (),
        accepted_at: float | None = None,
        trace: str | None = None,
    ) -> None:
        """Schedule a recount for a local user: now, or when their coalescing window ends."""
        with self._cond:
            if user_id not in self._conns:
                return
            dirty = self._pending.get(user_id)
            if dirty is None:
                dirty = self._pending[user_id] = Dirty()
                due = max(self._clock(), self._last_flush.get(user_id, 0.0) + self._coalesce())
                heapq.heappush(self._due, (due, user_id))
                self._cond.notify()
            if toast:
                dirty.toasts.append(toast)
                del dirty.toasts[:-MAX_TOASTS_PER_FRAME]
            dirty.notifications.update(notifications)
            if accepted_at is not None and (dirty.accepted_at is None or accepted_at < dirty.accepted_at):
                dirty.accepted_at = accepted_at
            dirty.trace = dirty.trace or trace

    def _recount_later(self, batch: list[tuple[int, Dirty]]) -> None:
        """Schedule the users of a failed count again after RECOUNT_RETRY_SECONDS, with what they were to show."""
        due = self._clock() + RECOUNT_RETRY_SECONDS
        with self._cond:
            for user_id, dirty in batch:
                if user_id not in self._conns:
                    continue
                pending = self._pending.get(user_id)
                if pending is not None:  # an event came meanwhile and is scheduled: it takes these along
                    pending.toasts[:0] = dirty.toasts
                    del pending.toasts[:-MAX_TOASTS_PER_FRAME]
                    pending.notifications |= dirty.notifications
                    continue
                self._pending[user_id] = dirty
                heapq.heappush(self._due, (due, user_id))
            self._cond.notify()

    def notify_all(self) -> None:
        """Schedule a recount for every local user (broadcast, or after the listener resubscribed)."""
        for user_id in self.local_user_ids():
            self.notify(user_id)

    def dispatch(self, message: dict) -> None:
        """Turn one pub/sub message (on this node's channel or the broadcast one) into recounts or closes."""
        kind = message.get("type")
        if kind in ("subscribe", "ssubscribe"):
            # (Re)subscribed: anything published while we were not listening was lost, so resync.
            self.listening.set()
            self._beat.set()  # Redis may have restarted empty: the registry and presence now
            self.notify_all()
            return
        if kind not in ("message", "smessage"):
            return
        channel = message["channel"].decode() if isinstance(message["channel"], bytes) else message["channel"]
        try:
            payload = json.loads(message["data"])
        except (TypeError, ValueError):
            log.warning("ignoring malformed realtime message on %s", channel)
            return
        if channel == broadcast_channel(self.app.config):
            self.notify_all()
            return
        if not isinstance(payload, dict):
            return
        self.stats.add("inbound_messages")
        kind = payload.get("kind")
        if kind == "badge":
            users = [u for u in payload.get("users") or () if type(u) is int]
            self.stats.add("inbound_events", len(users))
            toast, shown = parse_toast(payload), payload.get("n") if isinstance(payload.get("n"), dict) else {}
            accepted_at = payload.get("t") if isinstance(payload.get("t"), int | float) else None
            trace = payload.get("tp") if isinstance(payload.get("tp"), str) else None
            for user_id in users:
                ids = [n for n in shown.get(str(user_id)) or () if type(n) is int]
                self.notify(user_id, toast, ids, accepted_at, trace)
            return
        user_id = payload.get("user")
        if type(user_id) is not int:
            return
        if kind == "close":
            doomed = {str(socket_id) for socket_id in payload.get("sockets") or ()}
            self.close_where(user_id, lambda conn: conn.socket_id in doomed, CLOSE_TOO_MANY_SOCKETS)
        elif kind == "session-end":
            self.close_where(user_id, lambda conn: session_ended(conn, payload), CLOSE_SIGNED_OUT)
            # The kept session's sockets reconnect (1001) with its re-stamped cookie; a stolen copy of
            # that cookie (same sid, old version) cannot, as the handshake refuses it.
            self.close_where(user_id, lambda conn: session_kept(conn, payload), GOING_AWAY)

    # --- threads --------------------------------------------------------------------------------

    def ensure_started(self) -> None:
        """Start the listeners, heartbeat, stats and flushers once per process (again after a fork)."""
        with self._cond:
            if self._pid == os.getpid() and not self._stopping.is_set():
                return
            if self._stopping.is_set():
                return
            self._pid = os.getpid()
            self.node_id = node_id_for(self.app.config)
            openers = listener.subscriptions(
                self._store, registry.node_channel(self.node_id, self.app.config), broadcast_channel(self.app.config)
            )
            self._threads = [
                threading.Thread(
                    target=listener.listen,
                    args=(self._store, opener, self.dispatch, self._stopping, self.listening.clear),
                    name=f"hato-realtime-listener-{n}",
                    daemon=True,
                )
                for n, opener in enumerate(openers)
            ]
            self._threads += [
                threading.Thread(target=self._heartbeat_loop, name="hato-realtime-heartbeat", daemon=True),
                threading.Thread(target=self._stats_loop, name="hato-realtime-stats", daemon=True),
            ]
            for n in range(int(self.app.config["REALTIME_FLUSH_THREADS"])):
                self._threads.append(
                    threading.Thread(target=self._flush_loop, name=f"hato-realtime-flush-{n}", daemon=True)
                )
            for thread in self._threads:
                thread.start()
        atexit.register(self.shutdown)

    def _heartbeat_loop(self) -> None:
        """Every third of the TTL (and at once after a resubscribe): the registry and presence.

        Apart from the listener: at 5,000 sockets one pass costs ~80 ms of CPU and 0.6-1 s of round trips
        (measured on the shared 2-CPU machine), which every event arriving meanwhile would wait for.
        """
        while not self._stopping.is_set():
            wait = self._ttl() / 3
            self._beat.clear()  # a resubscribe from here on asks for another pass
            self._register_strays()
            try:
                client = self._store()
                registry.heartbeat(client, self.node_id, self.local_socket_ids(), self._ttl(), self.app.config)
                presence.touch(client, self._answering_users(), self._ttl(), config=self.app.config)
            except (*REALTIME_ERRORS, OSError) as exc:
                log.warning("realtime heartbeat failed, retrying: %s", exc)
                wait = HEARTBEAT_RETRY_SECONDS
            self._beat.wait(wait)

    def _register_strays(self) -> None:
        """Register the sockets opened while the store was away: until then no event is routed to them."""
        with self._cond:
            # only sockets whose registration failed: one being registered right now by connect() is not a stray
            strays = [conn for conn in self._strays if conn in self._conns.get(conn.user_id, ())]
            self._strays.clear()
        for n, conn in enumerate(strays):
            try:
                self._register(conn)
            except REALTIME_ERRORS:
                with self._cond:
                    self._strays.update(strays[n:])  # still away: the next pass tries these again (not the done)
                return

    def _answering_users(self) -> list[int]:
        """The users with a socket here that acked within the TTL: "online" is a tab that answers."""
        now, ttl = time.monotonic(), self._ttl()
        with self._cond:
            conns = [conn for conns in self._conns.values() for conn in conns]
        answering = {
            conn.user_id for conn in conns if conn.outbox.last_ack is not None and now - conn.outbox.last_ack < ttl
        }
        return sorted(answering)

    def _stats_loop(self) -> None:
        """Add this node's counters to Redis every FLUSH_SECONDS (a failed flush keeps them for the next)."""
        while not self._stopping.wait(nodestats.FLUSH_SECONDS):
            self.flush_stats()

    def flush_stats(self) -> None:
        """Add the counters gathered since the last flush to this node's hash now."""
        if self.node_id is None:
            return
        try:
            self.stats.flush(self._store(), self.node_id, self.socket_count(), self.app.config)
        except (*REALTIME_ERRORS, OSError) as exc:
            log.warning("realtime stats flush failed: %s", exc)

    def _collect_due(self) -> list[tuple[int, Dirty]]:
        """Take the users whose recount is due now (at most FLUSH_BATCH), with what they show; hold _cond."""
        now = self._clock()
        batch = []
        while self._due and self._due[0][0] <= now and len(batch) < FLUSH_BATCH:
            _, user_id = heapq.heappop(self._due)
            dirty = self._pending.pop(user_id, None)
            if dirty is not None and user_id in self._conns:
                self._last_flush[user_id] = now
                batch.append((user_id, dirty))
        return batch

    def _take_due(self) -> list[tuple[int, Dirty]] | None:
        with self._cond:
            while not self._stopping.is_set():
                batch = self._collect_due()
                if batch:
                    return batch
                self._cond.wait(self._due[0][0] - self._clock() if self._due else None)
            return None

    def flush_due(self) -> int:
        """Recount the users due now and hand their frames to their sockets; return how many users."""
        with self._cond:
            batch = self._collect_due()
        self._send(batch)
        return len(batch)

    def _flush_loop(self) -> None:
        while (batch := self._take_due()) is not None:
            self._send(batch)

    def _send(self, batch: list[tuple[int, Dirty]]) -> None:
        if not batch:
            return
        metas = {user_id: dirty.meta() for user_id, dirty in batch}
        with self._cond:
            languages = {user_id: {conn.frame_key for conn in self._conns.get(user_id, ())} for user_id, _ in batch}
        try:
            frames = self._render(batch, languages)
        except Exception:  # a bad batch must not kill the flusher; the next event resyncs
            log.exception("badge flush failed")
            return
        with self._cond:
            targets = [
                (conn, by_language[conn.frame_key], metas[user_id])
                for user_id, by_language in frames
                for conn in self._conns.get(user_id, ())
                if conn.frame_key in by_language  # a socket opened since greets itself
            ]
        self.stats.add("frames", len(targets))
        for conn, frame, meta in targets:
            conn.push(frame, meta)

    def _render(
        self, batch: list[tuple[int, Dirty]], languages: dict[int, set[str]] | None = None
    ) -> list[tuple[int, dict[str, str]]]:
        """Count each user once, then render their frame once per language their sockets speak."""
        languages = languages or {}
        counted: list[tuple[int, dict[int | None, queries.BadgeCounts], list[dict]]] = []
        frames: list[tuple[int, dict[str, str]]] = []
        with self.app.test_request_context(base_url=self.app.config["BASE_URL"]):
            try:
                for user_id, dirty in batch:
                    # Once per user, and once more per tenant a scoped feed socket of theirs shows (issue 32).
                    scopes = {scope_of(key)[1] for key in languages.get(user_id) or ()} or {None}
                    counts = {tenant: _counts(user_id, tenant) for tenant in scopes}
                    counted.append((user_id, counts, dirty.toasts))
            except SQLAlchemyError:
                # Database trouble (a restart, a failover): send what was counted and recount the rest a little
                # later, so their badges are right once it is back without waiting for their next event (one log
                # line per batch, not one per user of a broadcast).
                log.exception("badge count failed; %d of %d users not updated", len(batch) - len(counted), len(batch))
                self._recount_later(batch[len(counted) :])
            finally:
                db.session.remove()  # the connection goes back to the pool between batches
            by_language: dict[str, list[tuple[int, dict[int | None, queries.BadgeCounts], list[dict]]]] = {}
            for user_id, counts, toasts in counted:
                for language in languages.get(user_id) or {self._default_language()}:
                    by_language.setdefault(language, []).append((user_id, counts, toasts))
            rendered: dict[int, dict[str, str]] = {}
            for key, users in by_language.items():
                language, tenant = scope_of(key)
                # one switch per language in the batch, not one per user
                with force_locale(language.removeprefix(JSON_FRAMES)):
                    for user_id, counts, toasts in users:
                        rendered.setdefault(user_id, {})[key] = render_for(
                            key, counts[tenant], toasts_in_scope(toasts, tenant)
                        )
            frames = [(user_id, rendered[user_id]) for user_id, _, _ in counted]
        return frames

    # --- the socket side (runs in the socket's handler thread) ----------------------------------

    def greet(self, conn: Connection) -> bool:
        """Send the current count right away; False (socket closed 1011) if it cannot be read."""
        try:
            counts = _first_counts(conn.user_id, conn.tenant_id)
            with force_locale(conn.language):
                frame = render_for(conn.frame_key, counts)
        except SQLAlchemyError:
            log.exception("badge count failed on connect for user %s", conn.user_id)
            conn.ws.close(INTERNAL_ERROR, "try again")
            return False
        finally:
            db.session.remove()  # never hold a database connection while the socket idles
        self.stats.add("frames")
        with conn.write_lock:
            conn.ws.send(conn.outbox.send(frame, FrameMeta(), conn.json))
        return True

    def serve(self, conn: Connection) -> None:
        """Write queued frames, read acks, resend the unacked once, until the client goes away or the hub closes it."""
        ws = conn.ws
        try:
            while ws.connected:
                conn.write_pending()
                wait = self._resend_due(conn)
                if conn.expires_at is not None:
                    left = conn.expires_at - time.time()
                    if left <= 0:
                        self._close(conn, CLOSE_TOKEN_EXPIRED)
                        return
                    wait = min(wait, left)
                ws.event.wait(wait)
                ws.event.clear()
                while (message := ws.receive(timeout=0)) is not None:
                    seq = parse_ack(message)
                    if seq is not None:
                        self._acked(conn, seq)
                    elif conn.on_message is not None:
                        # Inbox pages have nothing else to say (discarded, so the buffer cannot grow); a feed
                        # socket's client may send a fresh token.
                        conn.on_message(conn, message)
        except ConnectionClosed:
            return
        except OSError:
            # A write the peer did not take within WRITE_TIMEOUT_SECONDS: it is gone, end the connection.
            self._close(conn, GOING_AWAY)

    def _resend_due(self, conn: Connection) -> float:
        """Resend the newest unacked frame once its ack is late, count the ones given up; return how long to sleep."""
        resend, given_up = conn.outbox.due()
        if resend is not None:
            conn.send_now(resend)
            self.stats.add("resends")
        for sent in given_up:
            sent.close_span("no ack after the resend")
        lost = sum(1 for sent in given_up if not sent.meta.ping)
        if lost:
            self.stats.add("unacked", lost)
        now = time.monotonic()
        if not conn.outbox.unacked and now >= conn.outbox.ping_at:
            # Quiet for a while: ask the tab to answer (its own timer, spread from the socket's open time, so
            # a process's thousands of sockets do not all ping in one burst).
            conn.send_now(conn.outbox.send("", PING, conn.json, now))
            conn.outbox.ping_at = now + conn.outbox.ping_every  # a frozen tab is asked again only that much later
        deadline = min(conn.outbox.next_deadline() or conn.outbox.ping_at, conn.outbox.ping_at)
        return min(IDLE_WAKE_SECONDS, max(0.01, deadline - now))

    def _acked(self, conn: Connection, seq: int) -> None:
        """The client acked frames up to seq: count them, time them from the 202, record what they showed."""
        done = conn.outbox.ack(seq)
        now = time.time()
        shown: set[int] = set()
        for sent in done:
            sent.close_span()
            if sent.meta.ping:
                continue
            self.stats.add("acks")
            if sent.meta.accepted_at is not None:
                self.stats.observe_ack(max(0.0, now - sent.meta.accepted_at))
            shown.update(sent.meta.notifications)
        try:
            if shown:
                seen.record(self._store(), conn.user_id, shown, self.app.config)
            self._touch_presence(conn.user_id)
        except (*REALTIME_ERRORS, OSError) as exc:
            log.warning("ack not recorded for user %s: %s", conn.user_id, exc)

    def _touch_presence(self, user_id: int) -> None:
        """Mark a user online at their first ack here (the heartbeat keeps it fresh after that, in bulk)."""
        if user_id in self._presence_touched:
            return  # online already: the heartbeat refreshes the users whose tabs answer
        self._presence_touched[user_id] = time.monotonic()
        presence.touch(self._store(), [user_id], self._ttl(), config=self.app.config)

    def shutdown(self, code: int = GOING_AWAY, timeout: float = 3.0) -> None:
        """Close every local socket with `code` (1001: reconnect elsewhere) and stop the threads.

        One loop here sends every close frame: waking thousands of handler threads to do it each
        would take seconds of GIL handoffs (measured: 789 of 5,000 closed within 6 s).
        """
        self._stopping.set()
        self._beat.set()
        with self._cond:
            conns = [conn for conns in self._conns.values() for conn in conns]
            self._cond.notify_all()
        if self.node_id is not None and self._pid == os.getpid():
            try:  # its sockets unregister as they close; the node leaves the list now, not a TTL later
                registry.leave(self._store(), self.node_id, self.app.config)
            except (*REALTIME_ERRORS, OSError) as exc:
                log.warning("node %s not taken off the list (it ages out): %s", self.node_id, exc)
            self.flush_stats()
        for conn in conns:
            conn.close(code)
        # A browser echoes the close frame and simple-websocket's reader thread then ends. One that
        # does not would leave that (non-daemon) thread in recv, holding the exiting worker until
        # gunicorn's graceful timeout, so end the TCP connection for it.
        echo_deadline = time.monotonic() + min(CLOSE_ECHO_SECONDS, timeout)
        for conn in conns:
            conn.ws.thread.join(max(0.0, echo_deadline - time.monotonic()))
            if conn.ws.thread.is_alive():
                try:
                    conn.ws.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._conns and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())

    def _default_language(self) -> str:
        return language_or_default(None, self.app.config["DEFAULT_LOCALE"])

    def _coalesce(self) -> float:
        return float(self.app.config["REALTIME_COALESCE_SECONDS"])

    def _ttl(self) -> float:
        return float(self.app.config["PRESENCE_TTL_SECONDS"])

    def _ack_timeout(self) -> float:
        return float(self.app.config["REALTIME_ACK_TIMEOUT_SECONDS"])

    def _max_sockets(self) -> int:
        return max(1, int(self.app.config["WS_MAX_SOCKETS_PER_USER"]))


def hub_for(app: Flask) -> Hub:
    """Return the app's hub (created at registration, started by the first socket)."""
    return app.extensions["hato_realtime"]


def init_app(app: Flask) -> None:
    """Set realtime defaults and attach an idle hub (no threads, no I/O)."""
    for key, value in DEFAULTS.items():
        app.config.setdefault(key, value)
    app.extensions["hato_realtime"] = Hub(app)


def shutdown_all(code: int = GOING_AWAY) -> None:
    """Close the sockets of every hub in this process (gunicorn worker exit, atexit)."""
    for hub in list(_hubs):
        hub.shutdown(code)
