"""The webhook channel's transport: a signed POST to an operator's endpoint, its answer classified.

The webhook SSRF rule (app/webhooks/targets.py) is checked on every request and every connect (a name
that resolves elsewhere later, DNS rebinding, gains nothing). Rows are claimed, retried, broken per
endpoint and sent to the DLQ by app/webhooks/engine.py.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import certifi

from app.providers.endpoints import EndpointRefused
from app.providers.guardedhttp import REPLY_MAX_BYTES, DeadlineExceeded, Reply, TransportError
from app.webhooks.events import CHANNEL as NAME
from app.webhooks.targets import WebhookPolicy

__all__ = ["NAME", "Outcome", "WebhookPolicy", "WebhookSession", "post"]
# A 4xx the receiver may get over by itself is retried; any other 4xx is the request's fault: to the DLQ.
RETRIED_4XX = {408, 409, 425, 429}
RETRY_AFTER_MAX = 3600.0


@dataclass(frozen=True)
class Outcome:
    """How one POST ended: sent | transient | permanent, with the response code and latency."""

    outcome: str
    duration_ms: int
    response_code: int | None = None
    error: str | None = None
    kind: str | None = None
    retry_after: float | None = None


def _retry_after(value: str | None) -> float | None:
    try:
        return min(max(float(value), 0.0), RETRY_AFTER_MAX) if value else None
    except ValueError:
        return None


class WebhookSession:
    """Kept-alive connections to webhook endpoints, each connected only to an address the policy allows.

    The guarded transport of push (app/providers/guardedhttp.py) made lean for a stream of small POSTs
    to one endpoint: http.client on a socket this class connects itself (resolve, check every address,
    connect, check the peer really reached: DNS rebinding gains nothing), TLS verified for the host name,
    no proxy, no redirect followed, at most REPLY_MAX_BYTES of an answer read. One watchdog thread per
    session (not one per request) enforces each exchange's wall-clock deadline by shutting the socket.
    """

    def __init__(self, policy: WebhookPolicy) -> None:
        self.policy = policy
        self._conns: dict[tuple[str, str, int], http.client.HTTPConnection] = {}
        self._deadline = 0.0
        self._armed: socket.socket | None = None
        self._active = False
        self._fired = False
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    def __enter__(self) -> WebhookSession:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Close every kept-alive connection and stop the watchdog."""
        self._closed = True
        self._wake.set()
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def _watch(self) -> None:
        while not self._closed:
            self._wake.clear()  # before reading the state: a change after this wakes the wait below
            with self._lock:
                wait = self._deadline - time.monotonic() if self._active else None
                if wait is not None and wait <= 0:
                    self._fired, self._active = True, False
                    if self._armed is not None:
                        try:
                            socket.socket.shutdown(self._armed, socket.SHUT_RDWR)
                        except OSError:
                            pass  # already closed
                    wait = None
            self._wake.wait(wait)

    def _arm(self, seconds: float) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="webhook-deadline", daemon=True)
            self._thread.start()
        with self._lock:
            self._deadline, self._armed, self._fired, self._active = time.monotonic() + seconds, None, False, True
        self._wake.set()

    def _watch_socket(self, sock: socket.socket) -> None:
        with self._lock:
            self._armed = sock
            fired = self._fired
        if fired:
            raise TimeoutError("the deadline passed while connecting")

    def _disarm(self) -> bool:
        with self._lock:
            self._armed, self._active = None, False
            return self._fired

    def _connect(self, scheme: str, host: str, port: int, timeout: float) -> http.client.HTTPConnection:
        policy = self.policy
        infos = policy.resolve(host, port)
        failure: OSError | None = None
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(timeout)
                sock.connect(address)
                policy.check_address(sock.getpeername()[0])  # the peer we really reached
                break
            except EndpointRefused:
                sock.close()
                raise
            except OSError as exc:
                sock.close()
                failure = exc
        else:
            raise TransportError(f"could not connect to {host}:{port}: {failure}")
        if scheme == "https":
            context = ssl.create_default_context(cafile=certifi.where())
            sock = context.wrap_socket(sock, server_hostname=host)
            conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
        conn.sock = sock
        return conn

    def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> Reply:
        """POST body to url within timeout seconds; EndpointRefused, DeadlineExceeded or TransportError otherwise."""
        scheme, host, port = self.policy.check_url(url)
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        key = (scheme, host, port)
        reused = key in self._conns
        try:
            return self._exchange(key, path, body, headers, timeout)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            if not reused:
                raise TransportError("the endpoint closed the connection without an answer") from None
            # A kept-alive connection the endpoint closed while idle: once more on a fresh one (a rare
            # duplicate at worst, with the same webhook-id).
            return self._exchange(key, path, body, headers, timeout)

    def _exchange(self, key, path: str, body: bytes, headers: Mapping[str, str], timeout: float) -> Reply:
        conn = self._conns.pop(key, None)
        self._arm(timeout)
        try:
            if conn is None:
                conn = self._connect(*key, timeout)
            self._watch_socket(conn.sock)
            conn.request("POST", path, body=body, headers={**headers, "Accept-Encoding": "identity"})
            response = conn.getresponse()
            content = response.read(REPLY_MAX_BYTES + 1)
            whole = len(content) <= REPLY_MAX_BYTES and (response.isclosed() or response.read(1) == b"")
            fired = self._disarm()
        except EndpointRefused:
            self._disarm()
            if conn is not None:
                conn.close()
            raise
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            fired = self._disarm()
            if conn is not None:
                conn.close()
            if fired:
                raise DeadlineExceeded(f"no complete answer within {timeout:g} s") from None
            raise
        except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
            fired = self._disarm()
            if conn is not None:
                conn.close()
            if fired or isinstance(exc, TimeoutError):
                raise DeadlineExceeded(f"no complete answer within {timeout:g} s") from exc
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        if fired:
            conn.close()
            raise DeadlineExceeded(f"no complete answer within {timeout:g} s")
        if whole and not response.will_close:
            self._conns[key] = conn  # kept alive for the next event
        else:
            conn.close()
        return Reply(response.status, response.headers, content[:REPLY_MAX_BYTES])


def post(session: WebhookSession, url: str, headers: Mapping[str, str], body: bytes, timeout: float) -> Outcome:
    """POST the signed body once and classify the answer; never raises for what the endpoint does."""
    clock = time.perf_counter()

    def took() -> int:
        return round((time.perf_counter() - clock) * 1000)

    try:
        reply = session.post(url, body, headers, timeout)
    except EndpointRefused as exc:
        return Outcome("permanent", took(), error=f"refused: {exc}", kind="refused")
    except DeadlineExceeded as exc:
        return Outcome("transient", took(), error=str(exc), kind="timeout")
    except TransportError as exc:
        return Outcome("transient", took(), error=str(exc)[:500], kind="transport")
    except OSError as exc:  # a name that does not resolve
        return Outcome("transient", took(), error=f"{type(exc).__name__}: {exc}"[:500], kind="transport")
    code = reply.status_code
    if 200 <= code < 300:
        return Outcome("sent", took(), code)
    error = f"HTTP {code}: {reply.text[:120]}" if reply.content else f"HTTP {code}"
    if 400 <= code < 500 and code not in RETRIED_4XX:
        return Outcome("permanent", took(), code, error, "rejected")
    return Outcome("transient", took(), code, error, "http", _retry_after(reply.headers.get("Retry-After")))
