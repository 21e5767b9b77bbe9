"""The channels: the one list of them, found in this package, one adapter module each.

The engine (app/delivery/engine.py) claims, re-checks, routes, times, records and retries every row
the same way. A channel adds only its own steps: why a row cannot go out on it (no address, a
suppressed address), where a user's message goes when that must be looked up (push subscriptions),
how a row becomes a provider Message, and what a provider's answer means beyond the row (a hard
bounce suppresses the address; a gone subscription is invalidated).

Adding a channel is adding one module here that defines `CHANNEL`, an instance of a
app.delivery.channels.base.Channel subclass: the registry imports every module of the package and
keeps each one's CHANNEL, so nothing else names the channels.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from app.delivery.channels.base import Channel

__all__ = [
    "Channel",
    "all_channels",
    "channel_for",
    "channel_labels",
    "channel_names",
    "member_channels",
    "routable_names",
    "template_channels",
]


@cache
def _registry() -> dict[str, Channel]:
    found: dict[str, Channel] = {}
    for module in pkgutil.iter_modules(__path__):
        if module.name == "base":
            continue
        channel = getattr(importlib.import_module(f"{__name__}.{module.name}"), "CHANNEL", None)
        if isinstance(channel, Channel):
            if channel.name in found:
                raise RuntimeError(f"two channel modules declare the channel {channel.name!r}")
            found[channel.name] = channel
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


def all_channels() -> list[Channel]:
    """Every channel, in display order."""
    return list(_registry().values())


def channel_names() -> tuple[str, ...]:
    """Every channel's name, in display order."""
    return tuple(_registry())


def channel_for(name: str) -> Channel:
    """The channel called name; a ValueError for anything else."""
    try:
        return _registry()[name]
    except KeyError:
        raise ValueError(f"unknown delivery channel {name!r}") from None


def member_channels(config=None) -> list[Channel]:
    """The channels members choose (preference columns), in order; with config, only those it can send on."""
    return [c for c in all_channels() if c.for_members and (config is None or c.configured(config))]


def routable_names() -> tuple[str, ...]:
    """The channels a notification may be sent on (the API's `channels`, a type's order, the ledger's rows)."""
    return tuple(c.name for c in all_channels() if c.for_members and c.delivers)


def template_channels() -> list[Channel]:
    """The channels operators write templates for, in order."""
    return [c for c in all_channels() if c.template_parts]


def channel_labels() -> dict[str, str]:
    """Every channel's name → its label (lazy, in the reader's language)."""
    return {c.name: c.label for c in all_channels()}
