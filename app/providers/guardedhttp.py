"""HTTP to endpoints someone else names (push services, webhook endpoints): checked addresses only, no proxy,
no redirect, small replies, a wall-clock deadline. Web Push and webhooks out both send through it.

GuardedSession.post() is what pywebpush's WebPusher calls on its requests_session, and what the webhook
provider calls. Each connection resolves the host itself and connects only to addresses the
EndpointPolicy allows, then checks the peer it actually reached (so a name that resolves elsewhere a
second time, DNS rebinding, gains nothing); TLS still verifies the certificate for the host name.
Proxies from the environment are never used (the proxy would make the connection we cannot check),
redirects are answers, not followed. A reply is read up to REPLY_MAX_BYTES, and one exchange (connect,
send, headers, body) has a wall-clock deadline: the session's watchdog thread shuts the socket when it
passes, so a server that trickles bytes cannot hold a worker past it. Known limit: the name lookup
itself is bounded only by the resolver.

It is http.client on a socket this module connects itself, one kept-alive connection per host: a stream
of small POSTs to one endpoint costs one send of headers and body together and one read each.
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

from app.providers.endpoints import EndpointPolicy, EndpointRefused

REPLY_MAX_BYTES = 1024  # a push service or webhook endpoint answers in a few bytes; more is not read
REPLY_TEXT_CHARS = 120  # of the reply, kept in an error text


class TransportError(Exception):
    """The exchange failed before a complete answer (connection refused, reset, TLS, a name that does not resolve)."""


class DeadlineExceeded(TransportError):
    """The exchange took longer than its deadline."""


@dataclass(frozen=True)
class Reply:
    """The part of an answer that is kept: status, headers and at most REPLY_MAX_BYTES of body."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        """The start of the body as one line of at most REPLY_TEXT_CHARS characters."""
        return " ".join(self.content.decode("utf-8", "replace").split())[:REPLY_TEXT_CHARS]


class _Watchdog:
    """Shuts the current exchange's socket when its deadline passes (a blocked read then returns).

    One daemon thread per session, started on the session's first exchange, not one per request: an
    endpoint gets a stream of small requests. A session runs one exchange at a time. The thread is woken
    only when a deadline comes before the time it sleeps until, and between exchanges it sleeps one
    deadline's length: a stream of millisecond exchanges under a deadline of seconds then costs no thread
    switch per request (waking it on every request cost a webhook a tenth of its time). It sleeps until
    woken only after a deadline's length with no exchange.
    """

    def __init__(self) -> None:
        self._deadline: float | None = None
        self._sock: socket.socket | None = None
        self.fired = False
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._sleeps_until: float | None = None  # when the thread wakes by itself (None: not before it is woken)
        self._arms = 0  # exchanges started, so the thread knows whether any came while it slept
        self._span = 0.0  # the latest exchange's time limit: how long the thread sleeps between exchanges

    def arm(self, seconds: float) -> None:
        """Start an exchange that must be over within seconds."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="http-deadline", daemon=True)
            self._thread.start()
        with self._lock:
            self._span = max(seconds, 0.0)
            self._deadline, self._sock, self.fired = time.monotonic() + self._span, None, False
            self._arms += 1
            wake = self._sleeps_until is None or self._deadline < self._sleeps_until
        if wake:
            self._wake.set()

    def watch(self, sock: socket.socket) -> None:
        """Make sock the one to shut at the deadline; TimeoutError when the deadline passed already."""
        with self._lock:
            self._sock = sock
            fired = self.fired
        if fired:
            raise TimeoutError("the deadline passed while connecting")

    def disarm(self) -> bool:
        """End the exchange; return whether the deadline fired during it."""
        with self._lock:
            self._deadline, self._sock = None, None
            return self.fired

    def close(self) -> None:
        """Stop the thread."""
        self._closed = True
        self._wake.set()

    def _watch(self) -> None:
        arms_seen = 0
        while not self._closed:
            self._wake.clear()  # before reading the state: a change after this wakes the wait below
            with self._lock:
                now = time.monotonic()
                if self._deadline is None:
                    # Between exchanges: while they keep coming, sleep a deadline's length; else until woken.
                    wait = self._span if self._arms != arms_seen else None
                elif self._deadline > now:
                    wait = self._deadline - now
                else:
                    self.fired, self._deadline, wait = True, None, None
                    if self._sock is not None:
                        try:
                            # socket.socket's own shutdown: on a TLS socket it cuts the fd without tearing down
                            # the SSL object under the reading thread's feet.
                            socket.socket.shutdown(self._sock, socket.SHUT_RDWR)
                        except OSError:
                            pass  # already closed: nothing left to stop
                arms_seen = self._arms
                self._sleeps_until = None if wait is None else now + wait
            self._wake.wait(wait)


_DEFAULT_PORTS = {"https": 443, "http": 80}


class GuardedSession:
    """Kept-alive connections, one per host, each connected only to an address the policy allows.

    post() as pywebpush calls it on its requests_session. One thread uses a session at a time.
    """

    def __init__(
        self, policy: EndpointPolicy, reply_max_bytes: int = REPLY_MAX_BYTES, cafile: str | None = None
    ) -> None:
        self.policy = policy
        self.reply_max_bytes = reply_max_bytes
        self.cafile = cafile  # a PEM bundle trusted instead of certifi's (a local stand-in: CHAT_WEBHOOK_CA_FILE)
        self._conns: dict[tuple[str, str, int], http.client.HTTPConnection] = {}
        self._watchdog = _Watchdog()
        self._tls: ssl.SSLContext | None = None

    def __enter__(self) -> GuardedSession:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Close every kept-alive connection and stop the watchdog."""
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        self._watchdog.close()

    def post(self, url: str, data: bytes | None = None, headers: Mapping | None = None, timeout: float = 10.0) -> Reply:
        """POST data to url within timeout seconds; EndpointRefused, DeadlineExceeded or TransportError otherwise."""
        scheme, host, port = self.policy.check_url(url)
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        key = (scheme, host, port or _DEFAULT_PORTS[scheme])
        send = {**dict(headers or {}), "Accept-Encoding": "identity"}
        reused = key in self._conns
        try:
            return self._exchange(key, path, data or b"", send, timeout)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            if not reused:
                raise TransportError("the endpoint closed the connection without an answer") from None
            # A kept-alive connection the endpoint closed while idle: once more on a fresh one (a rare
            # duplicate at worst, and a webhook carries the same webhook-id).
            return self._exchange(key, path, data or b"", send, timeout)

    def _exchange(self, key, path: str, body: bytes, headers: Mapping, timeout: float) -> Reply:
        conn = self._conns.pop(key, None)
        watchdog = self._watchdog
        watchdog.arm(timeout)
        try:
            if conn is None:
                conn = self._connect(*key, timeout)
            watchdog.watch(conn.sock)
            conn.request("POST", path, body=body, headers=headers)  # headers and a bytes body in one send
            response = conn.getresponse()
            content = response.read(self.reply_max_bytes + 1)
            whole = len(content) <= self.reply_max_bytes and (response.isclosed() or response.read(1) == b"")
            fired = watchdog.disarm()
        except EndpointRefused:
            watchdog.disarm()
            if conn is not None:
                conn.close()
            raise
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            fired = watchdog.disarm()
            if conn is not None:
                conn.close()
            if fired:
                raise DeadlineExceeded(f"no complete answer within {timeout:g} s") from None
            raise
        except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
            fired = watchdog.disarm()
            if conn is not None:
                conn.close()
            if fired or isinstance(exc, TimeoutError):
                raise DeadlineExceeded(f"no complete answer within {timeout:g} s") from exc
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        if fired:
            conn.close()
            raise DeadlineExceeded(f"no complete answer within {timeout:g} s")
        if whole and not response.will_close:
            self._conns[key] = conn  # kept alive for the next request to this host
        else:
            conn.close()
        return Reply(response.status, response.headers, content[: self.reply_max_bytes])

    def _connect(self, scheme: str, host: str, port: int, timeout: float) -> http.client.HTTPConnection:
        policy = self.policy
        try:
            infos = policy.resolve(host, port)
        except socket.gaierror as exc:
            raise TransportError(f"the name {host} does not resolve: {exc}") from exc
        failure: OSError | None = None
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(timeout)
                self._watchdog.watch(sock)
                sock.connect(address)
                policy.check_address(sock.getpeername()[0])  # the peer we really reached
                break
            except EndpointRefused:
                sock.close()
                raise
            except TimeoutError:
                sock.close()
                raise
            except OSError as exc:
                sock.close()
                failure = exc
        else:
            raise TransportError(f"could not connect to {host}:{port}: {failure}")
        if scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context(cafile=self.cafile or certifi.where())
            sock = self._tls.wrap_socket(sock, server_hostname=host)
            conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=self._tls)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
        conn.sock = sock
        return conn
