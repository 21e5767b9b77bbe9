"""The event types an endpoint may subscribe to, and the payload every event carries."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

EVENT_TYPES = (
    "notification.created",
    "notification.seen",
    "notification.read",
    "notification.archived",
    "notification.action",
    "delivery.sent",
    "delivery.delivered",
    "delivery.failed",
    "delivery.bounced",
    "preference.updated",
    "user.unsubscribed",
    "topic.unsubscribed",
)
CHANNEL = "webhook"  # the delivery channel name its jobs carry (app/delivery/engine.py hands them over)
TEST_EVENT = "webhook.test"  # sent only by the console's "send test event", to one endpoint


def new_webhook_id() -> str:
    """A Standard Webhooks message id: the same on every retry of one event to one endpoint."""
    return f"msg_{uuid.uuid4().hex}"


def payload(event_type: str, data: dict, occurred_at: datetime | None = None) -> tuple[str, datetime]:
    """The JSON body ({type, timestamp, data}) built once at event time, and that time."""
    at = occurred_at or datetime.now(UTC)
    body = {"type": event_type, "timestamp": at.isoformat().replace("+00:00", "Z"), "data": data}
    return json.dumps(body, separators=(",", ":"), sort_keys=True, default=str), at
