"""Which providers a channel has: its configured names in failover order, each built by its registered factory."""

from __future__ import annotations

from collections.abc import Mapping

from app.providers.base import FACTORIES, FALLBACKS, JOINS, Provider


def provider_names(channel: str, config: Mapping) -> list[str]:
    """The channel's provider names: the configured list in failover order, each followed by its fallback,
    then the providers that join the channel for targets of their own (APNs, FCM), when they are on."""
    _load_builtin()
    names: list[str] = []
    for name in (config.get(f"{channel.upper()}_PROVIDER") or "").split(","):
        while name and name.strip() not in names:
            names.append(name.strip())
            name = FALLBACKS.get(name.strip(), "")
    return names + [name for name, setting in JOINS.get(channel, ()) if config.get(setting) and name not in names]


def providers_for(channel: str, config: Mapping) -> list[Provider]:
    """Build the channel's configured providers in failover order (unconfigured ones are left out)."""
    built = (FACTORIES[name](config) for name in provider_names(channel, config) if name in FACTORIES)
    return [provider for provider in built if provider is not None]


def provider_for(channel: str, config: Mapping) -> Provider | None:
    """Build the channel's first provider, or None when the channel is not configured."""
    providers = providers_for(channel, config)
    return providers[0] if providers else None


def registered_names() -> list[str]:
    """Every provider name a channel may be configured with."""
    _load_builtin()
    return sorted(FACTORIES)


def _load_builtin() -> None:
    # Imported on first use, so importing app.providers stays light; each module registers itself.
    from app.providers import (  # noqa: F401
        apns,
        discord,
        fake,
        fcm,
        line,
        msteams,
        slack,
        smtp,
        twilio,
        vonage,
        webhook,
        webpush,
    )
