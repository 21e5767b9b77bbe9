"""The provider contract: send(message) -> Receipt, raising TransientError or PermanentError; and register()."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from app.providers.chat_content import ChatContent
from app.providers.mobile import MobilePush


@dataclass(frozen=True)
class Message:
    """One rendered message for one recipient (provider-neutral)."""

    delivery_id: int
    channel: str
    to: str
    subject: str
    text: str
    html: str | None = None
    to_name: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    # Web Push: the recipient's active subscriptions (PushTarget), all of which get the message; phones:
    # their DeviceTarget (app/providers/mobile.py).
    targets: tuple = ()
    # The phone part of a push message (app/providers/mobile.py MobilePush); None for every other message.
    mobile: MobilePush | None = None
    # What the ledger keeps of text (rendered_body) when text holds a secret, such as a verification code.
    logged_text: str | None = None
    # A chat message's content (app/providers/chat_content.py); None for every other message.
    chat: ChatContent | None = None
    # E-mail: the From header's display name instead of MAIL_FROM's (a tenant's sender name, issue 32).
    from_name: str | None = None


@dataclass(frozen=True)
class TargetOutcome:
    """How one target of a message fared (Web Push: one subscription), for its scope's breaker and pause."""

    scope: str  # who answered (Web Push: the push service's host:port), see Router.admit
    outcome: str  # sent | transient | permanent
    retry_after: float | None = None
    target: str = ""  # which target (a phone's token), when the channel records something per target
    invalid: str | None = None  # why the target is gone for good (Unregistered, BadDeviceToken…); None: it is not
    invalid_since: float | None = None  # APNs 410: since when (epoch seconds) the token has been invalid
    error: str | None = None  # what its service said when it did not take the message (for the delivery log)


@dataclass(frozen=True)
class Receipt:
    """What a provider answers for an accepted message."""

    provider: str
    message_id: str
    # Web Push: endpoints that accepted the message, and endpoints the push service says are gone.
    reached: tuple[str, ...] = ()
    invalidated: tuple[str, ...] = ()
    # Each target's own outcome when the provider sends to several (Web Push); empty otherwise.
    outcomes: tuple[TargetOutcome, ...] = ()
    response_code: int | None = None  # an HTTP provider's status code (webhooks keep it per try)


class ProviderError(Exception):
    """A failed send; kind is a short machine-readable label (timeout, refused, rejected, …)."""

    transient = True

    def __init__(
        self,
        message: str,
        kind: str = "error",
        retry_after: float | None = None,
        invalidated: tuple[str, ...] = (),
        outcomes: tuple[TargetOutcome, ...] = (),
        response_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.response_code = response_code
        # Seconds the provider asked us to wait (HTTP 429 Retry-After, an SMTP 421 hint); None if not said.
        self.retry_after = retry_after
        self.invalidated = invalidated
        self.outcomes = outcomes  # as Receipt.outcomes


class TransientError(ProviderError):
    """Retry later: timeouts, refused connections, 4xx answers."""

    transient = True


class PermanentError(ProviderError):
    """Retrying cannot help: the recipient or the message was rejected."""

    transient = False


class Provider(Protocol):
    """What the delivery engine needs from a provider."""

    name: str

    def __enter__(self) -> Provider: ...

    def __exit__(self, *exc_info) -> None: ...

    def send(self, message: Message) -> Receipt: ...


class FenceBroken(Exception):
    """A send sharing this fence failed to record its outcome: no other send may pass its point of no return."""


class Fence:
    """The lock the sends of one batch share from their point of no return until their record commits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.broken = False

    def enter(self) -> None:
        """Take the fence; FenceBroken (and the fence not held) once a holder failed to record."""
        self._lock.acquire()
        if self.broken:
            self._lock.release()
            raise FenceBroken("an earlier send of this batch could not be recorded")

    def leave(self, failed: bool) -> None:
        """Give the fence back; failed (the record did not commit) breaks it for every later send."""
        self.broken = self.broken or failed
        self._lock.release()


_fence = threading.local()  # .fence: the fence of this thread's send; .held: whether this send took it


@contextmanager
def fenced(fence: Fence | None) -> Iterator[None]:
    """Run one send and its record under fence from the send's point of no return to the block's end.

    Sends on several connections at once (app/delivery/engine.py) share one fence, so at most one message
    is ever past its point of no return and not yet recorded: a worker killed with SIGKILL re-sends at
    most that one. When a record fails (PostgreSQL went away), the fence breaks and the other sends stop
    before their point of no return, so a lost database costs one duplicate at most, too. A provider that
    marks its point (fences = True, calling point_of_no_return()) sends the rest unfenced.
    """
    if fence is None:
        yield
        return
    _fence.fence, _fence.held = fence, False
    failed = True
    try:
        yield
        failed = False
    finally:
        if _fence.held:
            fence.leave(failed)
        _fence.fence, _fence.held = None, False


def point_of_no_return() -> None:
    """Called by a provider right before the step after which the message may have arrived (SMTP: the final ".")."""
    fence = getattr(_fence, "fence", None)
    if fence is not None and not _fence.held:
        fence.enter()
        _fence.held = True


ProviderFactory = Callable[[Mapping], "Provider | None"]

# name -> factory; a channel picks its providers by name from config (EMAIL_PROVIDER, PUSH_PROVIDER).
FACTORIES: dict[str, ProviderFactory] = {}
# name -> the provider tried next when it is unavailable (smtp → smtp_fallback).
FALLBACKS: dict[str, str] = {}
# channel -> [(provider name, the setting that turns it on)]: providers that join a channel beside its
# configured ones, each for targets of its own (APNs and FCM join push: a member's phones), on exactly
# when their credentials are set.
JOINS: dict[str, list[tuple[str, str]]] = {}


def register(name: str, fallback: str | None = None, joins: str | None = None,
             when: str | None = None) -> Callable[[ProviderFactory], ProviderFactory]:  # fmt: skip
    """Register a provider factory under name, optionally with the name of its fallback, or as joining the
    channel `joins` whenever the setting `when` is set."""

    def decorator(factory: ProviderFactory) -> ProviderFactory:
        FACTORIES[name] = factory
        if fallback:
            FALLBACKS[name] = fallback
        if joins and when and (name, when) not in JOINS.setdefault(joins, []):
            JOINS[joins].append((name, when))
        return factory

    return decorator
