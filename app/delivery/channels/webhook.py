"""Webhooks out: the product's endpoints hear about changes, from the webhook outbox, signed per Standard Webhooks.

Not a channel members choose (no preference, no template): its rows are the outbox's events
(app/webhooks/outbox.py), each with one target, its endpoint. An endpoint is a scope of the webhook
provider (app/providers/webhook.py), so its events share a lane that asks the endpoint's own breaker
and pause before each POST: a slow or failing endpoint holds one lane, never another endpoint.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from flask_babel import lazy_pgettext

from app.delivery.channels.base import Channel
from app.providers import Message
from app.providers.webhook import WebhookTarget
from app.webhooks import signing
from app.webhooks.events import CHANNEL as NAME
from app.webhooks.outbox import OUTBOX

# Endpoints a batch posts to side by side (one lane each; an endpoint's own events go one after another).
PARALLEL_ENDPOINTS = 8


class WebhookChannel(Channel):
    """One signed POST per event to its endpoint."""

    name = NAME
    label = lazy_pgettext("channel", "Webhooks")
    order = 90
    source = OUTBOX
    scoped_rows = True
    for_members = False
    template_parts = ()

    def lanes(self, config: Mapping) -> int:
        """Endpoints side by side."""
        return PARALLEL_ENDPOINTS

    def targets(self, rows: Iterable) -> dict[int, tuple]:
        """Each event's endpoint."""
        return {row.id: (WebhookTarget(row.endpoint_id, row.url),) for row in rows}

    def scope_of(self, row) -> str:
        """The endpoint: its breaker and pause are its own."""
        return f"endpoint-{row.endpoint_id}"

    def build_message(self, row, keys: dict, config: Mapping, targets: tuple = ()) -> Message:
        """The event's JSON body with its three Standard Webhooks headers, signed now with the endpoint's secret.

        keys caches each endpoint's unsealed signing key for the batch.
        """
        if row.endpoint_id not in keys:
            secret = signing.unseal(row.secret_sealed, row.endpoint_id, config["SECRET_KEY"])
            keys[row.endpoint_id] = signing.secret_bytes(secret)
        body = row.payload.encode()
        headers = signing.headers(keys[row.endpoint_id], row.webhook_id, int(time.time()), body)
        return Message(delivery_id=row.id, channel=self.name, to=row.url, subject=row.webhook_id, text=row.payload,
                       headers=headers, targets=tuple(targets))  # fmt: skip

    def send_timeout(self, config: Mapping) -> float:
        """The longest one POST may take (a lane stops that long before the batch's lease ends)."""
        return float(config["WEBHOOK_TIMEOUT_SECONDS"])


CHANNEL = WebhookChannel()
