"""What the console shows about providers: each channel's providers in failover order, and their breakers."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.extensions import REALTIME_ERRORS, redis
from app.providers import breaker, provider_names, providers_for

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProviderState:
    """A provider a channel sends through: configured or not, and its circuit breaker's state."""

    channel: str
    name: str
    configured: bool
    breaker: str


def breaker_states(names: Iterable[str]) -> dict[str, str]:
    """Each provider's breaker: closed (also when it never tripped) | open | half_open; unknown without the store."""
    try:
        states, _ = breaker.snapshot(redis.realtime())  # breakers live in the realtime store
    except REALTIME_ERRORS as exc:
        log.warning("breaker states unavailable: %s", exc)
        return {name: "unknown" for name in names}
    return {name: states.get(name, "closed") for name in names}


def provider_states(config: Mapping, channels: Iterable[str]) -> list[ProviderState]:
    """Every provider of each channel (in failover order) and its breaker; "—" for a channel with none."""
    rows = []
    for channel in channels:
        names = provider_names(channel, config)
        configured = {provider.name for provider in providers_for(channel, config)}
        states = breaker_states(sorted(configured))
        rows += [ProviderState(channel, name, name in configured, states.get(name, "n/a")) for name in names or ["—"]]
    return rows
