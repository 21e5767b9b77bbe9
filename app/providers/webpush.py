"""Web Push (RFC 8030/8291/8292) with pywebpush: one encrypted POST per subscription of the recipient.

The message's text is the JSON payload (already cut under 3,993 bytes by app.push.payload); its
headers carry TTL, Urgency and Topic. Each request is signed with a VAPID JWT (aud = the endpoint's
origin, exp 12 h ahead, cached per origin for an hour) and bounded by PUSH_TIMEOUT. Answers: 2xx
reached; 404/410 the subscription is gone (the engine marks it invalidated); 429 and 5xx transient,
with Retry-After; any other 4xx permanent. One message goes to all of a user's devices: it counts as
sent when at least one accepted it (a partial retry would duplicate it on the others).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import requests
from py_vapid import Vapid
from pywebpush import WebPusher, WebPushException

from app.providers.base import Message, PermanentError, Receipt, TransientError, register

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


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(parsedate_to_datetime(value).timestamp() - (now or time.time()), 0.0)
    except (TypeError, ValueError):
        return None


class WebPushProvider:
    """Sends a Message to each of its targets over one requests.Session per batch."""

    name = "webpush"

    def __init__(self, private_key: str, subject: str, timeout: float) -> None:
        self.vapid = Vapid.from_string(private_key)
        self.subject = subject
        self.timeout = timeout
        self.session: requests.Session | None = None
        self._signed: dict[str, tuple[float, dict]] = {}

    @classmethod
    def from_config(cls, config: Mapping) -> WebPushProvider | None:
        """Build from VAPID_PRIVATE_KEY / VAPID_SUBJECT / PUSH_TIMEOUT; None without a key."""
        if not config.get("VAPID_PRIVATE_KEY"):
            return None
        return cls(
            config["VAPID_PRIVATE_KEY"],
            config.get("VAPID_SUBJECT") or "mailto:ops@localhost",
            float(config.get("PUSH_TIMEOUT", 10)),
        )

    def __enter__(self) -> WebPushProvider:
        self.session = requests.Session()
        return self

    def __exit__(self, *exc_info) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

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
        headers = {k: v for k, v in message.headers.items() if k.lower() != "ttl"}
        ttl = int(message.headers.get("TTL", 0))
        reached, gone, transient, permanent = [], [], [], []
        for target in message.targets:
            try:
                response = WebPusher(target.info(), requests_session=self.session or requests).send(
                    message.text,
                    {**headers, **self.vapid_headers(target.endpoint)},
                    ttl=ttl,
                    content_encoding="aes128gcm",
                    timeout=self.timeout,
                )
            except requests.Timeout as exc:
                transient.append(TransientError(f"timeout: {exc}", kind="timeout"))
                continue
            except requests.RequestException as exc:
                transient.append(TransientError(f"{type(exc).__name__}: {exc}", kind="connection"))
                continue
            except (WebPushException, ValueError) as exc:
                # The subscription's keys cannot be used to encrypt: no retry makes them valid.
                gone.append(target.endpoint)
                permanent.append(PermanentError(f"unusable subscription keys: {exc}", kind="invalid_subscription"))
                continue
            status = response.status_code
            if status < 300:
                reached.append((target.endpoint, response.headers.get("Location") or target.endpoint))
            elif status in GONE:
                gone.append(target.endpoint)
                permanent.append(PermanentError(f"push service: {status} subscription gone", kind="subscription_gone"))
            elif status == 429 or status >= 500:
                kind = "rate_limited" if status == 429 else f"http_{status}"
                transient.append(
                    TransientError(
                        f"push service: {status} {response.text[:200]}",
                        kind=kind,
                        retry_after=retry_after(response.headers.get("Retry-After")),
                    )
                )
            else:
                permanent.append(PermanentError(f"push service: {status} {response.text[:200]}", kind=f"http_{status}"))
        if reached:
            return Receipt(
                self.name, reached[0][1], reached=tuple(endpoint for endpoint, _ in reached), invalidated=tuple(gone)
            )
        if transient:
            first = transient[0]
            waits = [e.retry_after for e in transient if e.retry_after]
            raise TransientError(
                str(first), kind=first.kind, retry_after=max(waits) if waits else None, invalidated=tuple(gone)
            )
        raise PermanentError(str(permanent[0]), kind=permanent[0].kind, invalidated=tuple(gone))


register("webpush")(WebPushProvider.from_config)
