"""One open websocket of one user, the close codes it may end with, and the rules that pick sockets to close.

The hub (app/realtime/hub.py) keeps these by user and writes frames through them; only a socket's own
handler thread writes its frames, shutdown may write the close frame (Connection.close).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from app.live.publish import CLOSE_SIGNED_OUT, CLOSE_TOO_MANY_SOCKETS

GOING_AWAY = 1001
INTERNAL_ERROR = 1011
# Feed sockets (user tokens, app/realtime/views.py): 4401 tells the client to fetch a new token and reconnect
# (with backoff); 4403 that the token was refused for good (forged, another Hato, unknown user).
CLOSE_TOKEN_EXPIRED = 4401
CLOSE_TOKEN_REFUSED = 4403
# A feed socket's frames are JSON, not the inbox's HTML partials; its frame key carries this prefix.
JSON_FRAMES = "json:"
# Close reasons are for logs and developer tools; the page words what a reader sees itself (realtime.js).
CLOSE_MESSAGES = {
    GOING_AWAY: "server going away",
    CLOSE_SIGNED_OUT: "signed out",
    CLOSE_TOO_MANY_SOCKETS: "too many open tabs",
    CLOSE_TOKEN_EXPIRED: "token expired: fetch a new one",
    CLOSE_TOKEN_REFUSED: "token refused",
}


class ReaderThread(threading.Thread):
    """simple-websocket's per-socket reader thread, as a daemon.

    Once the handler is gone the reader has nothing to finish, but as a plain (non-daemon) thread a
    reader still waiting for a client's close echo kept an exiting worker alive until gunicorn's
    graceful timeout killed it (seen about once in ten SIGTERMs). shutdown() still closes every
    socket it knows with 1001 and waits briefly for the echoes; this only stops a straggler holding exit.
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("daemon", True)
        super().__init__(*args, **kwargs)


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
        "__weakref__",
    )

    def __init__(
        self, user_id: int, ws, sid: str | None = None, ver: int | None = None, language: str | None = None
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
        self.frames: deque[str] = deque(maxlen=8)
        self.write_lock = threading.Lock()

    @property
    def frame_key(self) -> str:
        """Which rendering of a user's frame this socket reads: its language, prefixed for JSON."""
        return f"{JSON_FRAMES}{self.language}" if self.json else self.language

    def push(self, frame: str) -> None:
        """Queue a frame and wake the handler thread."""
        self.frames.append(frame)
        self.wake()

    def write_pending(self) -> None:
        """Send the queued frames, oldest first (only the socket's handler thread calls this)."""
        while self.frames:
            with self.write_lock:
                self.ws.send(self.frames.popleft())

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
