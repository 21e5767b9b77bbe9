"""The provider contract: send(message) -> Receipt, raising TransientError or PermanentError.

Providers never retry and never swallow an error: the delivery engine owns retries, backoff and the
DLQ. A provider is used as a context manager around one batch, so a connection-oriented provider
(SMTP) opens one connection for the whole batch. A small registry maps each channel to the factory of
its configured provider; a factory returns None when its channel is not configured (push without
VAPID keys), and the engine then skips the rows with `<channel>_not_configured`. The next provider
(Web Push, a fallback SMTP) registers a factory here and implements the same three methods.
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


@dataclass(frozen=True)
class Receipt:
    """What a provider answers for an accepted message."""

    provider: str
    message_id: str


class ProviderError(Exception):
    """A failed send; kind is a short machine-readable label (timeout, refused, rejected, …)."""

    transient = True

    def __init__(self, message: str, kind: str = "error") -> None:
        super().__init__(message)
        self.kind = kind


class TransientError(ProviderError):
    """Retry later: timeouts, refused connections, 4xx answers."""

    transient = True


class PermanentError(ProviderError):
    """Retrying cannot help: the recipient or the message was rejected."""

    transient = False


class Provider(Protocol):
    """What the delivery engine needs from a provider."""

    name: str

    def __enter__(self) -> "Provider": ...

    def __exit__(self, *exc_info) -> None: ...

    def send(self, message: Message) -> Receipt: ...


ProviderFactory = Callable[[Mapping], "Provider | None"]

# name -> factory; a channel picks its provider by name from config (EMAIL_PROVIDER, PUSH_PROVIDER).
FACTORIES: dict[str, ProviderFactory] = {}


def register(name: str) -> Callable[[ProviderFactory], ProviderFactory]:
    """Register a provider factory under name."""

    def decorator(factory: ProviderFactory) -> ProviderFactory:
        FACTORIES[name] = factory
        return factory

    return decorator


def provider_for(channel: str, config: Mapping) -> "Provider | None":
    """Build the provider configured for channel, or None when the channel is not configured."""
    _load_builtin()
    name = config.get(f"{channel.upper()}_PROVIDER") or ""
    factory = FACTORIES.get(name)
    return factory(config) if factory else None


def _load_builtin() -> None:
    # Imported lazily so `app.providers` stays import-light; each module registers itself.
    from app.providers import fake, smtp  # noqa: F401
