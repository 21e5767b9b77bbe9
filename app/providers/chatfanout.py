"""Chat to every account a member linked: Slack, Microsoft Teams, Discord and LINE as one provider for the engine.

ChatFanout is push's fan-out (app/providers/pushfanout.py) with the chat providers as its parts: each of a
member's chat accounts (ChatTarget) goes to its provider's part, the parts side by side; the accounts that took
the message are noted on the row (reached) and a retry leaves them out, so nobody gets it twice. Each account is
a scope of its own (a Slack channel, a webhook, a LINE user): its Retry-After pause and breaker hold back only
it, and an operator can pause one part (`channels pause chat --provider slack`).

ChatPart is what the four parts share: the per-scope pacing of the service's published limit (a token bucket
per scope in Redis, as the providers' own, app/providers/ratelimit.py; the fan-out takes the tokens before the
send's point of no return, so a short wait holds back no other send), one answer per target, and the refusals
that mean the account is gone (kind account_invalid: the channel invalidates that account). ChatWebhookPolicy and
WebhookPoster are the guarded transport (app/providers/guardedhttp.py) for Slack, Teams and Discord webhooks:
https on the standard port to a host CHAT_ALLOWED_HOSTS allows, public addresses only, no redirect, a bounded
answer, a wall-clock deadline.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import replace

from flask import current_app
from flask_babel import gettext

from app.extensions import REALTIME_ERRORS, redis
from app.providers.base import Message, PermanentError, ProviderError, Receipt, TargetOutcome, TransientError
from app.providers.chat_content import ChatTarget
from app.providers.endpoints import (
    DEFAULT_PORTS,
    EndpointPolicy,
    EndpointRefused,
    _ip,
    host_allowed,
    normal_host,
    parse_hosts,
)
from app.providers.guardedhttp import DeadlineExceeded, GuardedSession, Reply, TransportError
from app.providers.pushfanout import PushFanout
from app.providers.ratelimit import Limit, TokenBucket
from app.providers.webpush import retry_after

log = logging.getLogger(__name__)

# The error kind of a refusal that means the account is gone for good (the channel invalidates it).
ACCOUNT_INVALID = "account_invalid"
CHAT_REPLY_MAX_BYTES = 16 * 1024  # Discord's ?wait=true answer is the created message


class ChatFanout(PushFanout):
    """The chat providers that are on, as one provider; see the module docstring."""

    name = "chat"

    def __init__(self, parts: list) -> None:
        super().__init__(parts)
        # The parts run on the fan-out's threads: each runs in the app's context (Redis, the dashboard's notes).
        try:
            self._app = current_app._get_current_object()
        except RuntimeError:  # built outside an app (a provider used on its own)
            self._app = None

    def part_of(self, target) -> str | None:
        """The part that sends to target: its provider's, when that one is on."""
        name = getattr(target, "provider", None)
        return name if name in self.parts else None

    def send(self, message: Message) -> Receipt:
        """Take each account's rate-limit token first (a short wait is slept here, before the send's point of no
        return, so it holds back no other send of the batch), then send to the accounts that got one."""
        ready, held = [], []
        for target in message.targets:
            part = self.parts.get(self.part_of(target) or "")
            wait = part.reserve(target) if part is not None else 0.0
            if wait:
                held.append(TargetOutcome(part.scope_of(target), "transient", wait, target=target.key))
            else:
                ready.append(target)
        held_outcomes = tuple(held)
        wait = min((o.retry_after for o in held), default=None)
        if not ready and held:
            raise TransientError("every chat account of the member is at its rate limit for now", kind="rate_limited",
                                 retry_after=wait, outcomes=held_outcomes)  # fmt: skip
        try:
            receipt = super().send(replace(message, targets=tuple(ready)))
        except ProviderError as exc:
            if held and not exc.transient:  # the row comes back for the accounts still to try
                raise TransientError(str(exc), kind=exc.kind, retry_after=wait,
                                     outcomes=exc.outcomes + held_outcomes) from None  # fmt: skip
            exc.outcomes = exc.outcomes + held_outcomes
            raise
        return replace(receipt, outcomes=receipt.outcomes + held_outcomes)

    def _one(self, name: str, message: Message):
        if self._app is None:
            return super()._one(name, message)
        with self._app.app_context():
            return super()._one(name, message)


class ChatPart:
    """What Slack, Teams, Discord and LINE share: paced sends, one per target, each target's own answer."""

    name = "chat-part"
    fences = True  # the fan-out marks the point of no return
    # (tokens per second, burst) per scope: the service's published limit for one channel, webhook or user.
    scope_limit: tuple[float, int] | None = None

    def __init__(self, config: Mapping) -> None:
        self.max_wait = float(config["RATE_LIMIT_MAX_WAIT_SECONDS"])
        self.retry_cap = float(config["RETRY_CAP_SECONDS"])
        self.timeout = float(config["CHAT_TIMEOUT"])
        self._buckets: dict[str, TokenBucket] = {}
        self._lock = threading.Lock()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        return None

    def scope_of(self, target: ChatTarget) -> str:
        """The account's scope: the part and the target's key (a webhook by its digest)."""
        return target.key

    def post(self, target: ChatTarget, message: Message) -> str:
        """Send message to target; its message id, or a ProviderError (kind account_invalid: the account is gone)."""
        raise NotImplementedError

    def send(self, message: Message) -> Receipt:
        """Send to each of message's targets (one per member and provider); a receipt when any took it."""
        reached, outcomes, errors, ids = [], [], [], []
        for target in message.targets:
            scope = self.scope_of(target)
            try:
                ids.append(self.post(target, message))
            except ProviderError as exc:
                invalid = str(exc)[:200] if exc.kind == ACCOUNT_INVALID else None
                outcome = "transient" if exc.transient else "permanent"
                outcomes.append(TargetOutcome(scope, outcome, exc.retry_after, target=target.key, invalid=invalid,
                                              error=str(exc)[:200]))  # fmt: skip
                errors.append(exc)
                continue
            reached.append(target.key)
            outcomes.append(TargetOutcome(scope, "sent", target=target.key))
        if reached:
            return Receipt(self.name, ids[0], reached=tuple(reached), outcomes=tuple(outcomes))
        if not errors:
            raise PermanentError("the member has no chat account this server can send to", kind="no_target")
        first = next((e for e in errors if e.transient), errors[0])
        cls = TransientError if first.transient else PermanentError
        raise cls(str(first), kind=first.kind, retry_after=first.retry_after, outcomes=tuple(outcomes),
                  response_code=first.response_code)  # fmt: skip

    def reserve(self, target: ChatTarget) -> float:
        """Take a token of the account's bucket (a short wait is slept): 0.0, or the seconds until one is due."""
        if self.scope_limit is None:
            return 0.0
        scope = self.scope_of(target)
        try:
            with self._lock:
                bucket = self._buckets.get(scope)
                if bucket is None:
                    bucket = self._buckets[scope] = TokenBucket(
                        redis.realtime(), f"chat:{scope}", Limit(*self.scope_limit)
                    )
            wait = bucket.take()
            while 0 < wait <= self.max_wait:
                time.sleep(wait)
                wait = bucket.take()
        except (*REALTIME_ERRORS, RuntimeError) as exc:  # no store (or no app): unpaced, the service's 429 still holds
            log.warning("chat pacing unavailable (%s); sending without it", exc)
            return 0.0
        return max(wait, 0.0)


class ChatWebhookPolicy(EndpointPolicy):
    """Where a chat webhook may point: https, the standard port, a host of CHAT_ALLOWED_HOSTS, public addresses."""

    @classmethod
    def from_config(cls, config: Mapping) -> ChatWebhookPolicy:
        """CHAT_ALLOWED_HOSTS, CHAT_ALLOW_HTTP_ENDPOINTS and CHAT_ALLOW_PRIVATE_ADDRESSES as one rule."""
        return cls(
            parse_hosts(config["CHAT_ALLOWED_HOSTS"]),
            bool(config["CHAT_ALLOW_HTTP_ENDPOINTS"]),
            bool(config["CHAT_ALLOW_PRIVATE_ADDRESSES"]),
        )

    def check_host(self, scheme: str, host: str, port: int | None) -> None:
        """Refuse a scheme, port, host or address this server does not post chat messages to."""
        if scheme != "https" and not (scheme == "http" and self.allow_http):
            raise EndpointRefused(gettext("The webhook URL must be an https URL."))
        if port not in (None, DEFAULT_PORTS.get(scheme)) and not self.allow_http:
            raise EndpointRefused(gettext("The webhook URL must use the standard https port."))
        if not normal_host(host):
            raise EndpointRefused(gettext("The webhook URL has no host."))
        if not host_allowed(host, self.allowed_hosts):
            raise EndpointRefused(
                gettext(
                    "%(host)s is not a chat service this server posts to (CHAT_ALLOWED_HOSTS)", host=normal_host(host)
                )  # fmt: skip
            )
        if _ip(normal_host(host)) is not None:
            self.check_address(normal_host(host))


class WebhookPoster:
    """JSON POSTs to chat webhooks over the guarded transport; one kept-alive session per sending thread."""

    def __init__(self, config: Mapping) -> None:
        self.policy = ChatWebhookPolicy.from_config(config)
        self.ca_file = config["CHAT_WEBHOOK_CA_FILE"] or None
        self.timeout = float(config["CHAT_TIMEOUT"])
        self._local = threading.local()
        self._sessions: list[GuardedSession] = []
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close every session's connections."""
        with self._lock:
            sessions, self._sessions = self._sessions, []
        for session in sessions:
            session.close()
        self._local = threading.local()

    def _session(self) -> GuardedSession:
        session = getattr(self._local, "session", None)
        if session is None:
            session = GuardedSession(self.policy, reply_max_bytes=CHAT_REPLY_MAX_BYTES, cafile=self.ca_file)
            self._local.session = session
            with self._lock:
                self._sessions.append(session)
        return session

    def post(self, who: str, url: str, payload: dict) -> Reply:
        """POST payload as JSON to url; a refused URL is permanent (account_invalid), a failed exchange transient."""
        body = json.dumps(payload, ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json; charset=utf-8"}
        try:
            return self._session().post(url, body, headers, self.timeout)
        except EndpointRefused as exc:  # the allow-list or the address rule changed since the URL was set
            raise PermanentError(f"{who}: refused: {exc}", kind=ACCOUNT_INVALID) from None
        except DeadlineExceeded as exc:
            raise TransientError(f"{who}: {exc}", kind="timeout") from None
        except (TransportError, OSError) as exc:
            error = str(exc) if isinstance(exc, TransportError) else f"{type(exc).__name__}: {exc}"
            raise TransientError(f"{who}: {error}"[:500], kind="transport") from None


class WebhookPart(ChatPart):
    """A chat service reached only through each member's webhook URL (Teams, Discord): no credentials of its own."""

    def __init__(self, config: Mapping) -> None:
        super().__init__(config)
        self.webhooks = WebhookPoster(config)

    @classmethod
    def from_config(cls, config: Mapping):
        """Always configured: each member's webhook URL carries its own secret."""
        return cls(config)

    def __exit__(self, *exc_info) -> None:
        self.webhooks.close()


def reply_json(reply: Reply) -> dict:
    """The answer's JSON object, or {} when it has none."""
    try:
        body = json.loads(reply.content)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


# A webhook answering these is gone for good (deleted, its secret no longer valid): the account is invalidated.
WEBHOOK_GONE = (401, 404, 410)
RETRIED_4XX = (408, 409, 425, 429)


def webhook_failure(who: str, reply: Reply, retry_cap: float, detail: str = "") -> ProviderError:
    """The error for a webhook's non-2xx answer: gone (account_invalid), slow down / 5xx (transient), or refused."""
    code = reply.status_code
    text = f"{who} {code}: {detail or reply.text}".strip()
    if code in WEBHOOK_GONE:
        return PermanentError(text, kind=ACCOUNT_INVALID, response_code=code)
    if code >= 500 or code in RETRIED_4XX:
        wait = retry_after(reply.headers.get("Retry-After"), retry_cap)
        kind = "rate_limited" if code == 429 else f"http_{code}"
        return TransientError(text, kind=kind, retry_after=wait, response_code=code)
    return PermanentError(text, kind="rejected", response_code=code)
