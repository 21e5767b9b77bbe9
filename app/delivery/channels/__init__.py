"""Delivery channels: what differs between e-mail and push, behind one interface the engine drives.

The engine (app/delivery/engine.py) claims, re-checks, routes, times, records and retries every row
the same way. A channel adds only its own steps: why a row cannot go out on it (no address, a
suppressed address), where a user's message goes when that must be looked up (push subscriptions),
how a row becomes a provider Message, and what a provider's answer means beyond the ledger (a hard
bounce suppresses the address; a gone subscription is invalidated). The webhook channel
(channels/webhook.py) posts events from the webhook outbox, not ledger rows: its jobs are the same
deliver_batch jobs, which hand them to app/webhooks/engine.py.
"""

from __future__ import annotations

from app.delivery.channels.base import Channel
from app.delivery.channels.mail import EmailChannel
from app.delivery.channels.push import PushChannel

CHANNELS: dict[str, Channel] = {"email": EmailChannel(), "push": PushChannel()}


def channel_for(name: str) -> Channel:
    """The channel called name (email | push); a ValueError for anything else."""
    try:
        return CHANNELS[name]
    except KeyError:
        raise ValueError(f"unknown delivery channel {name!r}") from None
