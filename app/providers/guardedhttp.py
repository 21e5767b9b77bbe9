"""HTTP to push services for endpoints a user supplied: checked addresses only, no proxy, no redirect, small replies.

GuardedSession.post() is what pywebpush's WebPusher calls on its requests_session. Each connection
resolves the host itself and connects only to addresses the EndpointPolicy allows, then checks the
peer it actually reached (so a name that resolves elsewhere a second time, DNS rebinding, gains
nothing); TLS still verifies the certificate for the host name. Proxies from the environment are
never used (the proxy would make the connection we cannot check), redirects are answers, not
followed. A reply is read up to REPLY_MAX_BYTES, and one exchange (connect, send, headers, body) has
a wall-clock deadline: a watchdog shuts the socket when it passes, so a server that trickles bytes
cannot hold a worker past it. Known limit: the name lookup itself is bounded only by the resolver.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass

import certifi
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import ConnectTimeoutError, HTTPError, NameResolutionError, NewConnectionError
from urllib3.exceptions import TimeoutError as Urllib3Timeout
from urllib3.util import Timeout, parse_url

from app.providers.endpoints import EndpointPolicy, EndpointRefused

REPLY_MAX_BYTES = 1024  # a push service answers in a few bytes; more is not read
REPLY_TEXT_CHARS = 120  # of the reply, kept in an error text

_local = threading.local()  # the exchange running on this thread, so its connection can join its watchdog


class TransportError(Exception):
    """The exchange failed before a complete answer (connection refused, reset, TLS, a name that does not resolve)."""


class DeadlineExceeded(TransportError):
    """The exchange took longer than its deadline."""


@dataclass(frozen=True)
class Reply:
    """The part of a push service's answer that is kept: status, headers and at most REPLY_MAX_BYTES of body."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        """The start of the body as one line of at most REPLY_TEXT_CHARS characters."""
        return " ".join(self.content.decode("utf-8", "replace").split())[:REPLY_TEXT_CHARS]


class _Watchdog:
    """Shuts the current connection's socket when the deadline passes (a blocked read then returns)."""

    def __init__(self, seconds: float) -> None:
        self.connection: HTTPConnection | None = None
        self.fired = False
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        sock = getattr(self.connection, "sock", None)
        if sock is not None:
            try:
                # socket.socket's own shutdown: on a TLS socket it cuts the fd without tearing down the
                # SSL object under the reading thread's feet.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass  # already closed: nothing left to stop

    def __enter__(self) -> _Watchdog:
        _local.watchdog = self
        self._timer.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._timer.cancel()
        _local.watchdog = None


class _Guarded:
    """Connection mixin: connect only to addresses the policy allows, and join the exchange's watchdog."""

    scheme = "https"

    def __init__(self, *args, policy: EndpointPolicy, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.policy = policy

    def _watch(self) -> None:
        watchdog = getattr(_local, "watchdog", None)
        if watchdog is not None:
            watchdog.connection = self

    def request(self, *args, **kwargs):
        """Send the request (on a kept-alive connection too, hence joining the watchdog here as well)."""
        self._watch()
        return super().request(*args, **kwargs)

    def _new_conn(self) -> socket.socket:
        # urllib3's own _new_conn resolves and connects in one call; this one checks in between.
        self._watch()
        self.policy.check_host(self.scheme, self.host, self.port)
        try:
            infos = self.policy.resolve(self.host, self.port)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        failure: OSError | None = None
        for family, kind, proto, _, address in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(self.timeout)
                sock.connect(address)
                self.policy.check_address(sock.getpeername()[0])  # the peer we really reached
                return sock
            except EndpointRefused:
                sock.close()
                raise
            except TimeoutError as exc:
                sock.close()
                raise ConnectTimeoutError(self, f"connecting to {self.host} timed out") from exc
            except OSError as exc:
                sock.close()
                failure = exc
        raise NewConnectionError(self, f"Failed to establish a new connection: {failure}")


class GuardedHTTPConnection(_Guarded, HTTPConnection):
    """Plain HTTP (only with PUSH_ALLOW_HTTP_ENDPOINTS: a local push service in tests)."""

    scheme = "http"


class GuardedHTTPSConnection(_Guarded, HTTPSConnection):
    """HTTPS, the certificate verified for the host name."""


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = GuardedHTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = GuardedHTTPSConnection


class GuardedSession:
    """One connection per push service host, kept alive for a batch; post() as pywebpush calls it."""

    def __init__(self, policy: EndpointPolicy, reply_max_bytes: int = REPLY_MAX_BYTES) -> None:
        self.policy = policy
        self.reply_max_bytes = reply_max_bytes
        self._pools: dict[tuple[str, str, int], HTTPConnectionPool] = {}

    def __enter__(self) -> GuardedSession:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Close every kept-alive connection."""
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()

    def _pool(self, scheme: str, host: str, port: int) -> HTTPConnectionPool:
        key = (scheme, host, port)
        if key not in self._pools:
            if scheme == "https":
                self._pools[key] = _HTTPSPool(host, port, maxsize=1, retries=False, ca_certs=certifi.where(),
                                              policy=self.policy)  # fmt: skip
            else:
                self._pools[key] = _HTTPPool(host, port, maxsize=1, retries=False, policy=self.policy)
        return self._pools[key]

    def post(self, url: str, data: bytes | None = None, headers: Mapping | None = None, timeout: float = 10.0) -> Reply:
        """POST data to url within timeout seconds; EndpointRefused, DeadlineExceeded or TransportError otherwise."""
        self.policy.check_url(url)
        parts = parse_url(url)  # the parser urllib3 connects by: both must agree the host is allowed
        scheme, host = (parts.scheme or "").lower(), parts.host or ""
        port = parts.port or (443 if scheme == "https" else 80)
        self.policy.check_host(scheme, host, port)
        pool = self._pool(scheme, host, port)
        send_headers = {**dict(headers or {}), "Accept-Encoding": "identity"}
        with _Watchdog(timeout) as watchdog:
            try:
                response = pool.urlopen("POST", parts.request_uri, body=data, headers=send_headers, redirect=False,
                                        retries=False, preload_content=False, decode_content=False,
                                        timeout=Timeout(connect=timeout, read=timeout))  # fmt: skip
                whole = False
                try:
                    content = response.read(self.reply_max_bytes + 1, decode_content=False)
                    whole = len(content) <= self.reply_max_bytes and response.read(1, decode_content=False) == b""
                finally:
                    if not whole:
                        response.close()  # the rest is never read: the connection cannot be reused
                    response.release_conn()
            except EndpointRefused:
                raise
            except (HTTPError, OSError) as exc:
                # urllib3's NewConnectionError is a ConnectTimeoutError by inheritance only: a refusal, not a wait.
                timed_out = isinstance(exc, TimeoutError | Urllib3Timeout) and not isinstance(exc, NewConnectionError)
                if watchdog.fired or timed_out:
                    raise DeadlineExceeded(f"no complete answer within {timeout:g} s") from exc
                raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        if watchdog.fired:
            raise DeadlineExceeded(f"no complete answer within {timeout:g} s")
        return Reply(response.status, response.headers, content[: self.reply_max_bytes])
