"""Verify Hato's outbound webhooks (Standard Webhooks signatures) with the standardwebhooks package."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

__all__ = ["WebhookVerificationError", "verify_webhook"]


def verify_webhook(headers: Mapping[str, str], body: bytes | str, secret: str) -> Any:
    """Return the event (parsed JSON) when its signature is good and recent; raise WebhookVerificationError if not.

    `secret` is the endpoint's `whsec_…` secret from the console; `body` the raw request body, unparsed.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    return Webhook(secret).verify(body.decode() if isinstance(body, bytes) else body, lowered)
