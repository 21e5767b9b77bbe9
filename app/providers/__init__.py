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

from app.providers.base import (
    Fence,
    FenceBroken,
    Message,
    PermanentError,
    Provider,
    ProviderError,
    Receipt,
    TargetOutcome,
    TransientError,
    fenced,
    point_of_no_return,
    register,
)
from app.providers.registry import provider_for, provider_names, providers_for

__all__ = [
    "Fence",
    "FenceBroken",
    "Message",
    "PermanentError",
    "Provider",
    "ProviderError",
    "Receipt",
    "TargetOutcome",
    "TransientError",
    "fenced",
    "point_of_no_return",
    "provider_for",
    "provider_names",
    "providers_for",
    "register",
]
