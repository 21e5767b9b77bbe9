"""One open websocket of one user, the close codes it may end with, and the rules that pick sockets to close.

The hub (app/realtime/hub.py) keeps these by user and writes frames through them; only a socket's own
handler thread writes its frames, shutdown may write the close frame (Connection.close).
"""

from __future__ import annotations

import heapq
import itertools
import os
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable

from simple_websocket import ConnectionClosed
from wsproto.events import Ping
from wsproto.frame_protocol import CloseReason
from wsproto.utilities import LocalProtocolError

from app.live.publish import CLOSE_SIGNED_OUT, CLOSE_TOO_MANY_SOCKETS
from app.realtime.acks import PLAIN, FrameMeta, Outbox

GOING_AWAY = 1001
INTERNAL_ERROR = 1011
# Feed sockets (user tokens, app/realtime/views.py): 4401 tells the client to fetch a new token and reconnect
# (with backoff); 4403 that the token was refused for good (forged, another Hato, unknown user).
CLOSE_TOKEN_EXPIRED = 4401
CLOSE_TOKEN_REFUSED = 4403
# A feed socket's frames are JSON, not the inbox's HTML partials; its frame key carries this prefix.
JSON_FRAMES = "json:"
# A feed socket scoped to a tenant (issue 32) reads its own frames (that tenant's counts): its key ends so.
TENANT_FRAMES = "@"


def scope_of(frame_key: str) -> tuple[str, int | None]:
    """(the frame key without its tenant, the tenant's id or None) of a frame key."""
    base, sep, tenant = frame_key.partition(TENANT_FRAMES)
    return base, int(tenant) if sep and tenant.isdigit() else None


# A send that the peer's full receive window holds this long ends the socket (it is not reading).
WRITE_TIMEOUT_SECONDS = 5
SEND_TIMEOUT = struct.pack("ll", WRITE_TIMEOUT_SECONDS, 0)  # struct timeval for SO_SNDTIMEO
# The longest the shared reader sleeps before looking for pings due (a socket added meanwhile waits that long).
READER_TICK_SECONDS = 1.0
# Close reasons are for logs and developer tools; the page words what a reader sees itself (realtime.js).
CLOSE_MESSAGES = {
    GOING_AWAY: "server going away",
    CLOSE_SIGNED_OUT: "signed out",
    CLOSE_TOO_MANY_SOCKETS: "too many open tabs",
    CLOSE_TOKEN_EXPIRED: "token expired: fetch a new one",
    CLOSE_TOKEN_REFUSED: "token refused",
}


class ReaderThread(threading.Thread):
    """simple-websocket's per-socket reader thread, as a daemon (used under gevent, where threads are greenlets).

    Once the handler is gone the reader has nothing to finish, but as a plain (non-daemon) thread a
    reader still waiting for a client's close echo kept an exiting worker alive until gunicorn's
    graceful timeout killed it (seen about once in ten SIGTERMs). shutdown() still closes every
    socket it knows with 1001 and waits briefly for the echoes; this only stops a straggler holding exit.
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("daemon", True)
        super().__init__(*args, **kwargs)


class SharedReader:
    """One thread that reads every websocket of the process and pings them, in place of a thread per socket.

    Under gthread each socket already pins its handler thread; a second (reader) thread per socket cost
    about 25 KB of stack, frame stack and objects, and doubled the threads a 5,000-socket process
    schedules. This does what simple-websocket's Base._thread does, for all sockets from one selector.
    A send from here (a pong, a close echo, a ping) must not stall every socket, so each socket gets a
    kernel send timeout (WRITE_TIMEOUT_SECONDS): a peer that stops reading for that long is dropped.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._selector: selectors.BaseSelector | None = None
        self._pid: int | None = None
        self._pings: list[tuple[float, int, SharedReaderThread]] = []
        self._order = itertools.count()

    def add(self, handle: SharedReaderThread) -> None:
        """Start reading handle's socket (and start the thread on first use in this process)."""
        ws = handle.ws
        try:
            ws.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, SEND_TIMEOUT)
        except OSError:
            pass  # already gone: the first read says so
        with self._lock:
            if self._pid != os.getpid():
                self._pid, self._pings = os.getpid(), []
                self._selector = selectors.DefaultSelector()
                threading.Thread(target=self._run, name="hato-realtime-reader", daemon=True).start()
            if ws.ping_interval:
                heapq.heappush(self._pings, (time.monotonic() + ws.ping_interval, next(self._order), handle))
            try:
                try:
                    self._selector.register(ws.sock, selectors.EVENT_READ, handle)
                except KeyError:
                    # This fd number belonged to a socket closed elsewhere before it was forgotten here.
                    stale = self._selector.get_map()[ws.sock.fileno()]
                    self._selector.unregister(stale.fileobj)
                    stale.data.done.set()
                    self._selector.register(ws.sock, selectors.EVENT_READ, handle)
            except (ValueError, KeyError, OSError):
                ws.connected = False
                handle.done.set()

    def forget(self, handle: SharedReaderThread) -> None:
        """Stop reading handle's socket (its handler is done with it; the server closes it next)."""
        with self._lock:
            try:
                self._selector.unregister(handle.ws.sock)
            except (ValueError, KeyError, OSError):
                pass  # already dropped
        handle.done.set()

    def _run(self) -> None:
        selector = self._selector
        while True:
            with self._lock:
                next_ping = self._pings[0][0] - time.monotonic() if self._pings else READER_TICK_SECONDS
            for key, _ in selector.select(min(READER_TICK_SECONDS, max(0.0, next_ping))):
                self._read(key.data)
            self._ping_due()

    def _read(self, handle: SharedReaderThread) -> None:
        ws = handle.ws
        try:
            data = ws.sock.recv(ws.receive_bytes, socket.MSG_DONTWAIT)
            if not data:
                raise ConnectionResetError
            ws.ws.receive_data(data)
            ws.connected = ws._handle_events()
        except BlockingIOError:
            return  # a spurious wake-up: nothing to read yet
        except (OSError, LocalProtocolError):
            ws.connected = False
            ws.event.set()
        if not ws.connected:
            self._drop(handle)

    def _ping_due(self) -> None:
        """Ping the sockets whose interval ended; close (1008) those whose last ping went unanswered."""
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._pings or self._pings[0][0] > now:
                    return
                _, _, handle = heapq.heappop(self._pings)
            ws = handle.ws
            if handle.done.is_set():
                continue
            try:
                if not ws.connected:  # the handler closed it and no echo came: let the socket go
                    raise ConnectionAbortedError
                if not ws.pong_received:
                    ws.close(reason=CloseReason.POLICY_VIOLATION, message="Ping/Pong timeout")
                    raise ConnectionAbortedError
                ws.pong_received = False
                ws.sock.send(ws.ws.send(Ping()))
            except (OSError, LocalProtocolError, ConnectionClosed):
                ws.connected = False
                ws.event.set()
                self._drop(handle)
                continue
            with self._lock:
                heapq.heappush(self._pings, (now + ws.ping_interval, next(self._order), handle))

    def _drop(self, handle: SharedReaderThread) -> None:
        self.forget(handle)
        handle.ws.sock.close()


_reader = SharedReader()


class SharedReaderThread:
    """simple-websocket's thread_class for one socket: start() hands the socket to the process's SharedReader.

    It answers what callers ask of a reader thread (name, start, join, is_alive); "alive" means the
    socket is still being read.
    """

    def __init__(self, target, **_) -> None:
        self.ws = target.__self__  # the bound Base._thread of the socket this reads
        self.name = "hato-realtime-reader"
        self.done = threading.Event()

    def start(self) -> None:
        """Start reading (the socket's handshake is done)."""
        _reader.add(self)

    def join(self, timeout: float | None = None) -> None:
        """Wait until the socket is no longer read (closed by either side)."""
        self.done.wait(timeout)

    def is_alive(self) -> bool:
        """Return whether the socket is still read."""
        return not self.done.is_set()

    def stop(self) -> None:
        """Stop reading: the handler returned, so nobody waits for what the client sends."""
        if not self.done.is_set():
            _reader.forget(self)


def reader_thread_class() -> type:
    """Return the thread_class for simple-websocket: the shared reader, or a greenlet each under gevent."""
    try:
        from gevent import monkey
    except ImportError:
        return SharedReaderThread
    return ReaderThread if monkey.is_module_patched("threading") else SharedReaderThread


def session_ended(conn: Connection, payload: dict) -> bool:
    """Return whether a session-end message covers conn: its session by id, or any older-version one but the kept."""
    if payload.get("sid") is not None and conn.sid == payload["sid"]:
        return True
    below = payload.get("below")
    if type(below) is not int or (conn.sid is not None and conn.sid == payload.get("keep")):
        return False
    return type(conn.ver) is not int or conn.ver < below


def session_kept(conn: Connection, payload: dict) -> bool:
    """Return whether conn belongs to the session a "sign out everywhere" kept, and predates its new version."""
    below = payload.get("below")
    if type(below) is not int or conn.sid is None or conn.sid != payload.get("keep"):
        return False
    return type(conn.ver) is not int or conn.ver < below


class Connection:
    """One open socket of one user. Its handler thread writes frames; shutdown may write the close frame.

    sid and ver are the session's (app/auth/sessions.py), so a session-end event finds its sockets;
    socket_id is its entry in the cross-process count (None while Redis is unreachable); language is the
    UI language its frames are rendered in (the page's, chosen at the handshake; None: DEFAULT_LOCALE's).
    A feed socket (user token) reads JSON frames, has expires_at (epoch seconds: closed 4401 then) and an
    on_message handler for the client's messages (a fresh token).
    """

    __slots__ = (
        "user_id",
        "ws",
        "frames",
        "write_lock",
        "sid",
        "ver",
        "language",
        "socket_id",
        "opened",
        "json",
        "expires_at",
        "on_message",
        "outbox",
        "device",
        "tenant_id",
        "__weakref__",
    )

    def __init__(
        self,
        user_id: int,
        ws,
        sid: str | None = None,
        ver: int | None = None,
        language: str | None = None,
        ack_timeout: float = 5.0,
    ) -> None:
        self.user_id = user_id
        self.ws = ws
        self.sid = sid
        self.ver = ver
        self.language = language
        self.socket_id: str | None = None
        self.opened = time.monotonic()
        self.json = False
        self.expires_at: float | None = None
        self.on_message: Callable[[Connection, str], None] | None = None
        # Every frame carries the full count, so when a client falls behind only the newest matter.
        self.frames: deque[tuple[str, FrameMeta]] = deque(maxlen=8)
        self.write_lock = threading.Lock()
        self.outbox = Outbox(ack_timeout)
        self.device: str | None = None
        self.tenant_id: int | None = None  # a feed socket scoped to a tenant (its token's claim)

    @property
    def frame_key(self) -> str:
        """Which rendering of a user's frame this socket reads: its language, prefixed for JSON."""
        key = f"{JSON_FRAMES}{self.language}" if self.json else self.language
        return key if self.tenant_id is None else f"{key}{TENANT_FRAMES}{self.tenant_id}"

    def push(self, frame: str, meta: FrameMeta = PLAIN) -> None:
        """Queue a frame (with what it shows, for its ack) and wake the handler thread."""
        self.frames.append((frame, meta))
        self.wake()

    def write_pending(self) -> int:
        """Send the queued frames, oldest first, numbered (only the socket's handler thread calls this).

        Returns how many went.
        """
        sent = 0
        while self.frames:
            body, meta = self.frames.popleft()
            with self.write_lock:
                self.ws.send(self.outbox.send(body, meta, self.json))
            sent += 1
        return sent

    def send_now(self, wire: str) -> None:
        """Write an already numbered frame (a resend) from the handler thread."""
        with self.write_lock:
            self.ws.send(wire)

    def stop_reading(self) -> None:
        """Release the socket from the shared reader before the server closes it (its fd number is reused)."""
        stop = getattr(self.ws.thread, "stop", None)  # a plain reader thread (gevent) ends by itself
        if stop is not None:
            stop()

    def wake(self) -> None:
        """Wake the handler thread (simple-websocket's event also fires on client messages and close)."""
        self.ws.event.set()

    def close(self, code: int) -> bool:
        """Send the close frame unless a write is stuck (a dead peer); return whether it was sent."""
        if not self.write_lock.acquire(timeout=0.05):
            return False
        try:
            self.ws.close(code, CLOSE_MESSAGES.get(code, ""))
            return True
        except Exception:  # noqa: BLE001 - already closed or broken: nothing to send
            return False
        finally:
            self.write_lock.release()
            self.wake()
