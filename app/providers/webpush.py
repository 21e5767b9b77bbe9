"""Web Push (RFC 8030/8291/8292) with pywebpush: one encrypted POST per subscription of the recipient.

The message's text is the JSON payload (already cut under 3,993 bytes by app.push.payload); its
headers carry TTL, Urgency and Topic. Each request is signed with a VAPID JWT (aud = the endpoint's
origin, exp 12 h ahead, cached per origin for an hour) and goes through app/providers/guardedhttp.py:
only to allowed push services at public addresses (checked on every connect), no redirect, 1 KiB of
reply, each target within PUSH_TIMEOUT and a batch's targets within its delivery lease. Answers: 2xx
reached; 404/410 the subscription is gone (the engine marks it invalidated); 429 and 5xx transient,
with Retry-After (strictly parsed, capped at RETRY_CAP_SECONDS); any other 4xx permanent; any other
exception is that target's transient failure, never the batch's. One message goes to all of a user's
devices: it counts as sent when at least one accepted it; the push channel retries the others alone
(notification_deliveries.reached). Each target's outcome is reported per push service (host:port, scope_of) so that one
service's pauses and failures hold back only its own subscriptions (app/providers/routing.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from py_vapid import Vapid
from pywebpush import WebPusher, WebPushException

from app.providers.base import (
    Message,
    PermanentError,
    ProviderError,
    Receipt,
    TargetOutcome,
    TransientError,
    register,
)
from app.providers.endpoints import EndpointPolicy, EndpointRefused
from app.providers.guardedhttp import DeadlineExceeded, GuardedSession, TransportError

GONE = (404, 410)
VAPID_EXP_SECONDS = 12 * 3600
VAPID_REUSE_SECONDS = 3600


@dataclass(frozen=True)
class PushTarget:
    """One browser subscription: where to POST and the keys to encrypt for."""

    endpoint: str
    p256dh: str
    auth: str

    def info(self) -> dict:
        """The subscription_info dict pywebpush takes."""
        return {"endpoint": self.endpoint, "keys": {"p256dh": self.p256dh, "auth": self.auth}}


def origin(endpoint: str) -> str:
    """scheme://host[:port] of an endpoint: the VAPID audience."""
    parts = urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc}"


def origin_key(endpoint: str) -> str:
    """host:port of an endpoint (port explicit): the scope of its push service's pauses and breaker."""
    parts = urlsplit(endpoint)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # a port that is not a number: still one scope per spelling, never an exception
        port = 0
    return f"{(parts.hostname or '').lower()}:{port}"


def retry_after(value: str | None, cap: float, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header (RFC 9110: ASCII delta-seconds or an HTTP-date), at most cap.

    Anything else (`²`, `-1`, `1e9`, garbage) is None: the header comes from whoever runs the endpoint.
    """
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        # More than 15 digits is beyond any cap (and int() refuses very long digit strings).
        return min(float(int(value)), cap) if len(value) <= 15 else cap
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:  # "-0000": UTC by RFC 5322, not the worker's local time
            when = when.replace(tzinfo=UTC)
        return min(max(when.timestamp() - (now or time.time()), 0.0), cap)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


class WebPushProvider:
    """Sends a Message to each of its targets over one GuardedSession per batch (app/providers/guardedhttp.py)."""

    name = "webpush"

    def __init__(self, private_key: str, subject: str, timeout: float, retry_cap: float,
                 policy: EndpointPolicy, batch_seconds: float | None = None) -> None:  # fmt: skip
        self.vapid = Vapid.from_string(private_key)
        self.subject = subject
        self.timeout = timeout  # one target's whole exchange (PUSH_TIMEOUT)
        self.retry_cap = retry_cap  # the longest Retry-After we honour (RETRY_CAP_SECONDS)
        self.policy = policy
        self.batch_seconds = batch_seconds  # all sends of one batch (`with provider:`), None: unbounded
        self.deadline = float("inf")
        self.session: GuardedSession | None = None
        self._signed: dict[str, tuple[float, dict]] = {}

    @classmethod
    def from_config(cls, config: Mapping) -> WebPushProvider | None:
        """Build from VAPID_PRIVATE_KEY / VAPID_SUBJECT / PUSH_TIMEOUT / RETRY_CAP_SECONDS; None without a key."""
        if not config.get("VAPID_PRIVATE_KEY"):
            return None
        return cls(
            config["VAPID_PRIVATE_KEY"],
            config["VAPID_SUBJECT"],
            float(config["PUSH_TIMEOUT"]),
            float(config["RETRY_CAP_SECONDS"]),
            EndpointPolicy.from_config(config),
            # The engine stops taking rows LEASE_MARGIN_SECONDS before its lease ends; a batch's sends stop
            # then too, so a lease never runs out under a slow push service.
            float(config["DELIVERY_LEASE_SECONDS"]) - float(config["LEASE_MARGIN_SECONDS"]),
        )

    def __enter__(self) -> WebPushProvider:
        self.session = GuardedSession(self.policy)
        if self.batch_seconds is not None:
            self.deadline = time.monotonic() + self.batch_seconds
        return self

    def __exit__(self, *exc_info) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
        self.deadline = float("inf")

    def vapid_headers(self, endpoint: str) -> dict:
        """The Authorization header for endpoint's origin (re-signed when the cached one is an hour old)."""
        aud = origin(endpoint)
        now = time.time()
        cached = self._signed.get(aud)
        if cached is None or now - cached[0] > VAPID_REUSE_SECONDS:
            claims = {"sub": self.subject, "aud": aud, "exp": int(now) + VAPID_EXP_SECONDS}
            cached = self._signed[aud] = (now, self.vapid.sign(claims))
        return dict(cached[1])

    def send(self, message: Message) -> Receipt:
        """POST the payload to every target; see the module docstring for how answers are classified."""
        if not message.targets:
            raise PermanentError("the recipient has no active push subscription", kind="no_subscription")
        if self.session is None:  # used outside `with provider:` (a one-off send)
            with self:
                return self.send(message)
        headers = {k: v for k, v in message.headers.items() if k.lower() != "ttl"}
        ttl = int(message.headers.get("TTL", 0))
        reached, gone, transient, permanent, outcomes = [], [], [], [], []
        for target in message.targets:
            failure: ProviderError | None = None
            timeout = min(self.timeout, self.deadline - time.monotonic())
            try:
                if timeout <= 0:
                    raise DeadlineExceeded("the batch's time (the delivery lease) ran out before this subscription")
                response = WebPusher(target.info(), requests_session=self.session).send(
                    message.text,
                    {**headers, **self.vapid_headers(target.endpoint)},
                    ttl=ttl,
                    content_encoding="aes128gcm",
                    timeout=timeout,
                )
            except EndpointRefused as exc:  # before ValueError: the keys are fine, the address is not
                failure = PermanentError(f"endpoint refused: {exc}", kind="endpoint_refused")
            except DeadlineExceeded as exc:
                failure = TransientError(f"timeout: {exc}", kind="timeout")
            except TransportError as exc:
                failure = TransientError(str(exc), kind="connection")
            except (WebPushException, ValueError) as exc:
                # The subscription's keys cannot be used to encrypt: no retry makes them valid.
                gone.append(target.endpoint)
                failure = PermanentError(f"unusable subscription keys: {exc}", kind="invalid_subscription")
            except Exception as exc:  # whatever one subscription's answer does, the other targets still go out
                failure = TransientError(f"{type(exc).__name__}: {exc}", kind="error")
            else:
                failure = self._answer(target, response, reached, gone)
            if failure is None:
                outcomes.append(TargetOutcome(self.scope_of(target), "sent"))
                continue
            (transient if failure.transient else permanent).append(failure)
            outcome = "transient" if failure.transient else "permanent"
            outcomes.append(
                TargetOutcome(self.scope_of(target), outcome, failure.retry_after, error=str(failure)[:200])
            )
        done = {"invalidated": tuple(gone), "outcomes": tuple(outcomes)}
        if reached:
            return Receipt(self.name, reached[0][1], reached=tuple(endpoint for endpoint, _ in reached), **done)
        if transient:
            first = transient[0]
            waits = [e.retry_after for e in transient if e.retry_after]
            raise TransientError(str(first), kind=first.kind, retry_after=max(waits) if waits else None, **done)
        raise PermanentError(str(permanent[0]), kind=permanent[0].kind, **done)

    def _answer(self, target: PushTarget, response, reached: list, gone: list) -> ProviderError | None:
        """Classify one push service answer (module docstring); None when it took the message."""
        status = response.status_code
        if status < 300:
            reached.append((target.endpoint, response.headers.get("Location") or target.endpoint))
            return None
        if status in GONE:
            gone.append(target.endpoint)
            return PermanentError(f"push service: {status} subscription gone", kind="subscription_gone")
        if status == 429 or status >= 500:
            kind = "rate_limited" if status == 429 else f"http_{status}"
            wait = retry_after(response.headers.get("Retry-After"), self.retry_cap)
            return TransientError(f"push service: {status} {response.text[:200]}", kind=kind, retry_after=wait)
        return PermanentError(f"push service: {status} {response.text[:200]}", kind=f"http_{status}")

    @staticmethod
    def scope_of(target: PushTarget) -> str:
        """The push service a target belongs to (host:port): its rate-limit pause and breaker are its own."""
        return origin_key(target.endpoint)


register("webpush")(WebPushProvider.from_config)
