"""Webhooks out: one signed POST to an operator's endpoint per event, its answer classified.

The transport is push's (app/providers/guardedhttp.py): every connect checks the address it reached
against the webhook SSRF rule (WebhookPolicy: https on the standard port, public addresses only, no
host allow-list because the product names its own hosts), no proxy, no redirect followed, 1 KiB of
answer read, each exchange within WEBHOOK_TIMEOUT_SECONDS of wall-clock time. Each sending thread has its
own kept-alive connections. Each endpoint is a scope of this provider: its breaker and its Retry-After
pause are its own (app/providers/routing.py), so one failing endpoint never holds back another.

Answers: 2xx sent; 408, 409, 425, 429 and 5xx transient (with Retry-After, capped); any other 4xx is
the request's fault, permanent; a refused address is permanent; timeouts and transport errors transient.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from flask_babel import gettext

from app.providers.base import Message, PermanentError, Receipt, TargetOutcome, TransientError, register
from app.providers.endpoints import DEFAULT_PORTS, EndpointPolicy, EndpointRefused, _ip, normal_host
from app.providers.guardedhttp import DeadlineExceeded, GuardedSession, TransportError

# A 4xx the receiver may get over by itself is retried; any other 4xx is the request's fault: to the DLQ.
RETRIED_4XX = {408, 409, 425, 429}
RETRY_AFTER_MAX = 3600.0


class WebhookPolicy(EndpointPolicy):
    """Push's endpoint rule without the push-service allow-list."""

    def check_host(self, scheme: str, host: str, port: int | None) -> None:
        """Refuse a scheme, port or address this server does not post to."""
        if scheme != "https" and not (scheme == "http" and self.allow_http):
            raise EndpointRefused(gettext("The webhook URL must be an https URL."))
        if port not in (None, DEFAULT_PORTS[scheme]) and not self.allow_http:
            raise EndpointRefused(gettext("The webhook URL must use the standard https port."))
        if not normal_host(host):
            raise EndpointRefused(gettext("The webhook URL has no host."))
        if _ip(normal_host(host)) is not None:
            self.check_address(normal_host(host))

    @classmethod
    def from_config(cls, config: Mapping) -> WebhookPolicy:
        """WEBHOOK_ALLOW_HTTP_ENDPOINTS and WEBHOOK_ALLOW_PRIVATE_ADDRESSES as one rule."""
        return cls((), bool(config["WEBHOOK_ALLOW_HTTP_ENDPOINTS"]), bool(config["WEBHOOK_ALLOW_PRIVATE_ADDRESSES"]))


@dataclass(frozen=True)
class WebhookTarget:
    """Where one event goes: its endpoint (the scope) and the endpoint's URL."""

    endpoint_id: int
    url: str


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header in seconds (at most RETRY_AFTER_MAX); None when absent or unreadable."""
    try:
        return min(max(float(value), 0.0), RETRY_AFTER_MAX) if value else None
    except ValueError:
        return None


class WebhookProvider:
    """POSTs each Message's text to its one target, signed by the channel (the headers), over guarded HTTP."""

    name = "webhook"

    def __init__(self, policy: WebhookPolicy, timeout: float) -> None:
        self.policy = policy
        self.timeout = timeout
        self._local = threading.local()
        self._sessions: list[GuardedSession] = []
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: Mapping) -> WebhookProvider:
        """Build from the webhook SSRF switches and WEBHOOK_TIMEOUT_SECONDS."""
        return cls(WebhookPolicy.from_config(config), float(config["WEBHOOK_TIMEOUT_SECONDS"]))

    def __enter__(self) -> WebhookProvider:
        return self

    def __exit__(self, *exc_info) -> None:
        with self._lock:
            sessions, self._sessions = self._sessions, []
        for session in sessions:
            session.close()
        self._local = threading.local()

    def _session(self) -> GuardedSession:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = GuardedSession(self.policy)
            with self._lock:
                self._sessions.append(session)
        return session

    def send(self, message: Message) -> Receipt:
        """POST once; see the module docstring for how the answer is classified."""
        (target,) = message.targets
        scope = self.scope_of(target)
        try:
            reply = self._session().post(target.url, message.text.encode(), message.headers, self.timeout)
        except EndpointRefused as exc:
            refused = (TargetOutcome(scope, "permanent"),)
            raise PermanentError(f"refused: {exc}", kind="refused", outcomes=refused) from exc
        except DeadlineExceeded as exc:
            raise TransientError(str(exc), kind="timeout", outcomes=(TargetOutcome(scope, "transient"),)) from exc
        except (TransportError, OSError) as exc:  # OSError: a name that does not resolve
            error = str(exc) if isinstance(exc, TransportError) else f"{type(exc).__name__}: {exc}"
            raise TransientError(error[:500], kind="transport", outcomes=(TargetOutcome(scope, "transient"),)) from exc
        code = reply.status_code
        if 200 <= code < 300:
            return Receipt(self.name, message.subject, response_code=code, outcomes=(TargetOutcome(scope, "sent"),))
        error = f"HTTP {code}: {reply.text}" if reply.content else f"HTTP {code}"
        if 400 <= code < 500 and code not in RETRIED_4XX:
            raise PermanentError(error, kind="rejected", response_code=code,
                                 outcomes=(TargetOutcome(scope, "permanent"),))  # fmt: skip
        wait = retry_after(reply.headers.get("Retry-After"))
        raise TransientError(error, kind="http", retry_after=wait, response_code=code,
                             outcomes=(TargetOutcome(scope, "transient", wait),))  # fmt: skip

    @staticmethod
    def scope_of(target: WebhookTarget) -> str:
        """An endpoint is its own scope: its pause and breaker hold back only its events."""
        return f"endpoint-{target.endpoint_id}"


register("webhook")(WebhookProvider.from_config)
