"""The provider contract: send(message) -> Receipt, raising TransientError or PermanentError.

Providers never retry and never swallow an error: the delivery engine owns retries, backoff and the
DLQ. A provider is used as a context manager around one batch, so a connection-oriented provider
(SMTP) opens one connection for the whole batch. A small registry maps each channel to the factory of
its configured provider; a factory returns None when its channel is not configured (push without
VAPID keys), and the engine then skips the rows with `<channel>_not_configured`. A channel may have
several providers in failover order (`EMAIL_PROVIDER=smtp,backup`, and a provider may name its own
fallback at registration, like smtp → smtp_fallback); app/providers/routing.py puts each behind its
token bucket and circuit breaker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol


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
    # Web Push: the recipient's active subscriptions (PushTarget), all of which get the message.
    targets: tuple = ()


@dataclass(frozen=True)
class Receipt:
    """What a provider answers for an accepted message."""

    provider: str
    message_id: str
    # Web Push: endpoints that accepted the message, and endpoints the push service says are gone.
    reached: tuple[str, ...] = ()
    invalidated: tuple[str, ...] = ()


class ProviderError(Exception):
    """A failed send; kind is a short machine-readable label (timeout, refused, rejected, …)."""

    transient = True

    def __init__(
        self, message: str, kind: str = "error", retry_after: float | None = None, invalidated: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message)
        self.kind = kind
        # Seconds the provider asked us to wait (HTTP 429 Retry-After, an SMTP 421 hint); None if not said.
        self.retry_after = retry_after
        self.invalidated = invalidated


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


ProviderFactory = Callable[[Mapping], "Provider | None"]

# name -> factory; a channel picks its providers by name from config (EMAIL_PROVIDER, PUSH_PROVIDER).
FACTORIES: dict[str, ProviderFactory] = {}
# name -> the provider tried next when it is unavailable (smtp → smtp_fallback).
FALLBACKS: dict[str, str] = {}


def register(name: str, fallback: str | None = None) -> Callable[[ProviderFactory], ProviderFactory]:
    """Register a provider factory under name, optionally with the name of its fallback."""

    def decorator(factory: ProviderFactory) -> ProviderFactory:
        FACTORIES[name] = factory
        if fallback:
            FALLBACKS[name] = fallback
        return factory

    return decorator


def provider_names(channel: str, config: Mapping) -> list[str]:
    """The channel's provider names in failover order: the configured list, each followed by its fallback."""
    _load_builtin()
    names: list[str] = []
    for name in (config.get(f"{channel.upper()}_PROVIDER") or "").split(","):
        while name and name.strip() not in names:
            names.append(name.strip())
            name = FALLBACKS.get(name.strip(), "")
    return names


def providers_for(channel: str, config: Mapping) -> list[Provider]:
    """Build the channel's configured providers in failover order (unconfigured ones are left out)."""
    built = (FACTORIES[name](config) for name in provider_names(channel, config) if name in FACTORIES)
    return [provider for provider in built if provider is not None]


def provider_for(channel: str, config: Mapping) -> Provider | None:
    """Build the channel's first provider, or None when the channel is not configured."""
    providers = providers_for(channel, config)
    return providers[0] if providers else None


def _load_builtin() -> None:
    # Imported lazily so `app.providers` stays import-light; each module registers itself.
    from app.providers import fake, smtp, webpush  # noqa: F401
