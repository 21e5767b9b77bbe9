"""APNs, Apple's provider API over HTTP/2 with token auth: one POST per iOS device of the recipient.

The engine builds its providers per batch, so what is costly to make lives per process, not per
provider: one httpx client per endpoint (one TLS connection carrying many HTTP/2 streams, kept
between batches, made anew in a forked child, closed at exit) and the provider token. That token is
an ES256 JWT (kid = APNS_KEY_ID, iss = APNS_TEAM_ID, iat) signed with the team's .p8 key, shared by
the threads and reused for 50 minutes: Apple refuses one issued over an hour ago, and one renewed more
often than every 20 minutes; 403 ExpiredProviderToken renews it and the request is tried once more.
Up to APNS_CONCURRENCY requests of one message are in flight at once. The connection belongs to an
asyncio loop on a thread of its own, and every request (from any sending thread) runs on that loop:
httpx's synchronous HTTP/2 connection is not thread-safe (two threads' streams interleave their header
frames and APNs drops the connection, httpx issue 3002), an event loop's single thread is.

Answers, per device: 200 reached (apns-id is the message id); 410 (Unregistered) and 400
BadDeviceToken / DeviceTokenNotForTopic: the token is invalid (TargetOutcome.invalid, and since when
for 410), permanent for this message; any other 4xx permanent for that device; 429 and 5xx transient,
with Retry-After (strictly parsed, capped at RETRY_CAP_SECONDS); no answer (connect error, timeout)
transient. A message counts as sent when one device took it (a retry would duplicate it on the
others); otherwise the failure is transient when any device's was, else permanent. Each device's
outcome is reported under the scope `apns:<host>` (scope_of). Tokens are never logged whole.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import re
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from urllib.parse import urlsplit

import httpx
import jwt

from app.config import load_p256_private_key
from app.providers.apns_payload import apns_payload, request_headers
from app.providers.base import (
    Message,
    PermanentError,
    ProviderError,
    Receipt,
    TargetOutcome,
    TransientError,
    register,
)
from app.providers.mobile import DeviceTarget, MobilePush, token_hint
from app.providers.webpush import retry_after

log = logging.getLogger(__name__)

JWT_REUSE_SECONDS = 50 * 60  # between Apple's 20-minute floor and its 60-minute ceiling
# Connections idle this long are closed by us: long enough to carry steady traffic from batch to batch.
KEEPALIVE_SECONDS = 300.0
ERROR_BODY_LIMIT = 4096  # bytes of an error answer worth parsing ({"reason": …, "timestamp": …})
# What a device token looks like (hex); anything else never reaches a URL path.
TOKEN_PATTERN = re.compile(r"[0-9a-fA-F]{8,200}")
# 400 reasons that mean the token itself is unusable (410 always does).
INVALID_REASONS = frozenset({"BadDeviceToken", "DeviceTokenNotForTopic"})


class ProviderToken:
    """The JWT APNs knows us by: signed with the team's .p8 key, reused for 50 minutes, shared by threads."""

    def __init__(self, key_file: str, key_id: str, team_id: str, clock: Callable[[], float] = time.time) -> None:
        self.key_file, self.key_id, self.team_id = key_file, key_id, team_id
        self.clock = clock
        self.lock = threading.Lock()
        self._key = None
        self._jwt = ""
        self._issued = float("-inf")

    def current(self) -> str:
        """The JWT to send now (signed anew once the last one is 50 minutes old); ValueError for an unusable key."""
        with self.lock:
            if self.clock() - self._issued >= JWT_REUSE_SECONDS:
                self._sign()
            return self._jwt

    def renew(self, stale: str) -> str:
        """A new JWT after APNs called stale expired; the one another thread already made in its place, if any."""
        with self.lock:
            if self._jwt == stale:
                self._sign()
            return self._jwt

    def _sign(self) -> None:
        if self._key is None:
            self._key = load_p256_private_key(self.key_file)
        now = self.clock()
        claims = {"iss": self.team_id, "iat": int(now)}
        self._jwt = jwt.encode(claims, self._key, algorithm="ES256", headers={"kid": self.key_id})
        self._issued = now


@dataclass(frozen=True)
class _Connection:
    """A process's client for one endpoint on its own event loop, and the threads that wait for one message's
    devices at once."""

    pid: int
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    client: httpx.AsyncClient
    pool: ThreadPoolExecutor
    timeout: float

    def post(self, url: str, content: bytes, headers: dict) -> httpx.Response:
        """POST on the loop's connection from any thread; wait for the answer."""
        call = asyncio.run_coroutine_threadsafe(self.client.post(url, content=content, headers=headers), self.loop)
        try:
            return call.result(self.timeout * 4 + 5)  # httpx's own timeouts end it first; this is a backstop
        except TimeoutError:
            call.cancel()
            raise httpx.TimeoutException("no answer from the APNs connection's loop") from None

    def close(self) -> None:
        """Close the connection on its loop, then stop the loop."""
        if self.loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(self.client.aclose(), self.loop).result(5)
            except Exception as exc:  # noqa: BLE001 - closing at exit: say it and go on
                log.debug("closing the APNs connection: %s", exc)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


_lock = threading.Lock()
_tokens: dict[tuple[str, str, str], ProviderToken] = {}
_connections: dict[tuple, _Connection] = {}


def provider_token(key_file: str, key_id: str, team_id: str) -> ProviderToken:
    """This process's token for the key (one JWT however many providers the batches build)."""
    with _lock:
        key = (key_file, key_id, team_id)
        if key not in _tokens:
            _tokens[key] = ProviderToken(key_file, key_id, team_id)
        return _tokens[key]


def _connection(ca_file: str, timeout: float, concurrency: int) -> _Connection:
    """This process's client for these settings (one per endpoint origin, as httpx pools by origin)."""
    key = (ca_file, timeout, concurrency)
    with _lock:
        found = _connections.get(key)
        if found is None or found.pid != os.getpid():  # a forked child never uses its parent's socket
            context = ssl.create_default_context(cafile=ca_file) if ca_file else httpx.create_ssl_context()
            transport = httpx.AsyncHTTPTransport(
                verify=context,
                http1=False,  # APNs speaks HTTP/2 only: offer h2 alone in ALPN
                http2=True,
                limits=httpx.Limits(keepalive_expiry=KEEPALIVE_SECONDS),
                retries=1,  # a failed connect (never a sent request) is tried once more
            )
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="apns-loop", daemon=True)
            thread.start()
            client = httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(timeout), follow_redirects=False)
            found = _connections[key] = _Connection(os.getpid(), loop, thread, client,
                                                    ThreadPoolExecutor(concurrency, "apns"), timeout)  # fmt: skip
        return found


def close_connections() -> None:
    """Close this process's APNs clients (at exit, and between tests); the next send opens a new one."""
    with _lock:
        mine = [found for found in _connections.values() if found.pid == os.getpid()]
        _connections.clear()
    for found in mine:
        found.pool.shutdown(wait=False)
        found.close()


def _after_fork() -> None:
    # A lock held by another thread at fork would never be released in the child. The JWT is kept (a
    # child that signed its own would renew it more often than Apple allows); the parent's clients are
    # forgotten, not closed: closing would end the parent's connection.
    global _lock
    _lock = threading.Lock()
    _connections.clear()
    for token in _tokens.values():
        token.lock = threading.Lock()


atexit.register(close_connections)
os.register_at_fork(after_in_child=_after_fork)


def scope_of_endpoint(endpoint: str) -> str:
    """apns:<host>[:port] of an endpoint (the port only when not 443): its pauses and breaker are its own."""
    parts = urlsplit(endpoint)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"apns:{host}" if port in (None, 443) else f"apns:{host}:{port}"


@dataclass(frozen=True)
class _Answer:
    """How one device's request ended."""

    token: str
    apns_id: str | None = None
    failure: ProviderError | None = None
    invalid: str | None = None
    invalid_since: float | None = None


class ApnsProvider:
    """Sends a Message's MobilePush to each of its iOS DeviceTargets (see the module docstring)."""

    name = "apns"

    def __init__(self, key_file: str, key_id: str, team_id: str, topic: str,
                 endpoint: str = "https://api.push.apple.com", ca_file: str = "", concurrency: int = 20,
                 timeout: float = 10.0, retry_cap: float = 600.0) -> None:  # fmt: skip
        self.token = provider_token(key_file, key_id, team_id)
        self.topic = topic
        self.endpoint = endpoint.rstrip("/")
        self.ca_file = ca_file
        self.concurrency = concurrency
        self.timeout = timeout
        self.retry_cap = retry_cap  # the longest Retry-After we honour
        self.scope = scope_of_endpoint(self.endpoint)

    @classmethod
    def from_config(cls, config: Mapping) -> ApnsProvider | None:
        """Build from the APNS_* settings and RETRY_CAP_SECONDS; None without APNS_KEY_FILE (APNs off)."""
        if not config.get("APNS_KEY_FILE"):
            return None
        return cls(
            config["APNS_KEY_FILE"],
            config["APNS_KEY_ID"],
            config["APNS_TEAM_ID"],
            config["APNS_TOPIC"],
            config["APNS_ENDPOINT"],
            config["APNS_CA_FILE"],
            int(config["APNS_CONCURRENCY"]),
            float(config["APNS_TIMEOUT"]),
            float(config["RETRY_CAP_SECONDS"]),
        )

    def __enter__(self) -> ApnsProvider:
        return self  # the connection is the process's, kept across batches

    def __exit__(self, *exc_info) -> None:
        return None

    def scope_of(self, target) -> str:
        """The APNs server every device of this provider is reached through (apns:<host>)."""
        return self.scope

    def send(self, message: Message) -> Receipt:
        """POST the push to every iOS device of the message at once; see the module docstring for the answers."""
        devices = [t for t in message.targets if isinstance(t, DeviceTarget) and t.platform == "ios"]
        if not devices:
            raise PermanentError("the recipient has no iOS device", kind="no_device")
        if message.mobile is None:
            raise PermanentError("the message has no phone payload", kind="no_payload")
        connection = _connection(self.ca_file, self.timeout, self.concurrency)
        one = partial(self._send_one, connection, message.mobile)
        answers = [one(devices[0])] if len(devices) == 1 else list(connection.pool.map(one, devices))
        return self._aggregate(answers)

    def _send_one(self, connection: _Connection, push: MobilePush, device: DeviceTarget) -> _Answer:
        """One device's request (tried once more with a new JWT after ExpiredProviderToken)."""
        token, hint = device.token, token_hint(device.token)
        if not TOKEN_PATTERN.fullmatch(token):
            failure = PermanentError(f"APNs: {hint} is not a device token", kind="device_gone")
            return _Answer(token, failure=failure, invalid="BadDeviceToken")
        alert = None if push.background else push.alert_for(device.locale)
        if alert is None and not push.background:
            return _Answer(token, failure=PermanentError(f"APNs: no alert for {hint}'s language", kind="no_alert"))
        body = apns_payload(push, alert)
        headers = request_headers(push, device.app_id or self.topic, time.time())
        url = f"{self.endpoint}/3/device/{token}"
        try:
            bearer = self.token.current()
        except ValueError as exc:  # the key file went missing or bad after start-up
            return _Answer(token, failure=TransientError(f"APNs: APNS_KEY_FILE {exc}", kind="credentials"))
        try:
            response = connection.post(url, body, {**headers, "authorization": f"bearer {bearer}"})
            if response.status_code == 403 and _reason(response)[0] == "ExpiredProviderToken":
                log.info("APNs said the provider token expired: signing a new one")
                bearer = self.token.renew(bearer)
                response = connection.post(url, body, {**headers, "authorization": f"bearer {bearer}"})
        except httpx.TimeoutException as exc:
            failure = TransientError(f"APNs: timeout for {hint}: {_clean(exc, token)}", kind="timeout")
            return _Answer(token, failure=failure)
        except httpx.HTTPError as exc:
            failure = TransientError(f"APNs: connection for {hint}: {_clean(exc, token)}", kind="connection")
            return _Answer(token, failure=failure)
        except Exception as exc:  # whatever one device's request does, the others still go out
            failure = TransientError(f"APNs: {type(exc).__name__} for {hint}: {_clean(exc, token)}", kind="error")
            return _Answer(token, failure=failure)
        return self._answer(token, response)

    def _answer(self, token: str, response: httpx.Response) -> _Answer:
        """Classify one APNs answer (module docstring)."""
        status = response.status_code
        if status < 300:
            return _Answer(token, apns_id=response.headers.get("apns-id") or "")
        reason, data = _reason(response)
        text = f"APNs: {status} {reason or '(no reason)'} for {token_hint(token)}"
        if status == 410 or (status == 400 and reason in INVALID_REASONS):
            since = data.get("timestamp")
            if isinstance(since, bool) or not isinstance(since, int | float) or status != 410:
                since = None
            failure = PermanentError(text, kind="device_gone", response_code=status)
            return _Answer(token, failure=failure, invalid=reason or "Unregistered",
                           invalid_since=since / 1000 if since is not None else None)  # fmt: skip
        if status == 429 or status >= 500:
            wait = retry_after(response.headers.get("retry-after"), self.retry_cap)
            kind = "rate_limited" if status == 429 else f"http_{status}"
            return _Answer(token, failure=TransientError(text, kind=kind, retry_after=wait, response_code=status))
        kind = "credentials" if status == 403 else f"http_{status}"
        return _Answer(token, failure=PermanentError(text, kind=kind, response_code=status))

    def _aggregate(self, answers: list[_Answer]) -> Receipt:
        """One Receipt when a device took the message; else the failure (transient if any was)."""
        outcomes = tuple(self._outcome(answer) for answer in answers)
        invalidated = tuple(answer.token for answer in answers if answer.invalid)
        reached = [answer for answer in answers if answer.failure is None]
        if reached:
            return Receipt(self.name, reached[0].apns_id or "", reached=tuple(a.token for a in reached),
                           invalidated=invalidated, outcomes=outcomes)  # fmt: skip
        failures = [answer.failure for answer in answers if answer.failure is not None]
        transient = [failure for failure in failures if failure.transient]
        first = (transient or failures)[0]
        text = "; ".join(str(failure) for failure in failures)
        done = {"invalidated": invalidated, "outcomes": outcomes, "response_code": first.response_code}
        if transient:
            waits = [failure.retry_after for failure in transient if failure.retry_after]
            raise TransientError(text, kind=first.kind, retry_after=max(waits) if waits else None, **done)
        raise PermanentError(text, kind=first.kind, **done)

    def _outcome(self, answer: _Answer) -> TargetOutcome:
        failure = answer.failure
        if failure is None:
            return TargetOutcome(self.scope, "sent", target=answer.token)
        return TargetOutcome(self.scope, "transient" if failure.transient else "permanent", failure.retry_after,
                             target=answer.token, invalid=answer.invalid,
                             invalid_since=answer.invalid_since, error=str(failure)[:200])  # fmt: skip


def _reason(response: httpx.Response) -> tuple[str, dict]:
    """Apple's reason and the whole error body ({"reason": …, "timestamp": …}); ("", {}) when there is none."""
    content = response.content
    if not content or len(content) > ERROR_BODY_LIMIT:
        return "", {}
    try:
        data = json.loads(content)
    except ValueError:
        return "", {}
    if not isinstance(data, dict):
        return "", {}
    reason = data.get("reason")
    return (reason if isinstance(reason, str) else ""), data


def _clean(exc: Exception, token: str) -> str:
    """An exception's text without the device token (an error may quote the URL)."""
    return str(exc).replace(token, token_hint(token))[:300]


register("apns", joins="push", when="APNS_KEY_FILE")(ApnsProvider.from_config)
