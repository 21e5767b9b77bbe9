"""Push writes: validate and upsert a browser's subscription, delete it, record what the push service said."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from urllib.parse import urlsplit

import sqlalchemy as sa

from app.extensions import db

MAX_ENDPOINT_CHARS = 2048
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")

UPSERT_SQL = sa.text(
    """
INSERT INTO push_subscriptions (user_id, endpoint, p256dh, auth, user_agent)
VALUES (:user_id, :endpoint, :p256dh, :auth, :user_agent)
ON CONFLICT (endpoint) DO UPDATE
SET user_id = EXCLUDED.user_id, p256dh = EXCLUDED.p256dh, auth = EXCLUDED.auth,
    user_agent = EXCLUDED.user_agent, invalidated_at = NULL
RETURNING id
"""
)

DELETE_SQL = sa.text("DELETE FROM push_subscriptions WHERE user_id = :user_id AND endpoint = :endpoint")

GONE_SQL = sa.text(
    """
UPDATE push_subscriptions SET invalidated_at = now()
WHERE endpoint = ANY(CAST(:endpoints AS text[])) AND invalidated_at IS NULL
"""
)

REACHED_SQL = sa.text(
    "UPDATE push_subscriptions SET last_success_at = now() WHERE endpoint = ANY(CAST(:endpoints AS text[]))"
)


class SubscriptionError(ValueError):
    """The subscription JSON is not one a browser would send; the message says what is wrong."""


@dataclass(frozen=True)
class Subscription:
    """A validated PushSubscription.toJSON()."""

    endpoint: str
    p256dh: str
    auth: str


def _key(value, name: str, size: int) -> str:
    if not isinstance(value, str) or not value or len(value) > 200:
        raise SubscriptionError(f"keys.{name} is missing")
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError) as exc:
        raise SubscriptionError(f"keys.{name} is not base64url") from exc
    if len(raw) != size or (name == "p256dh" and raw[0] != 4):
        raise SubscriptionError(f"keys.{name} is not a valid key")
    return value.rstrip("=")


def parse_subscription(data, allow_local_http: bool) -> Subscription:
    """Validate {endpoint, keys: {p256dh, auth}}: an https endpoint (http only to this machine when allowed)."""
    if not isinstance(data, dict):
        raise SubscriptionError("send the subscription as a JSON object")
    endpoint = data.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint or len(endpoint) > MAX_ENDPOINT_CHARS:
        raise SubscriptionError("endpoint is missing or too long")
    parts = urlsplit(endpoint)
    local = parts.scheme == "http" and parts.hostname in LOCAL_HOSTS and allow_local_http
    if not parts.hostname or (parts.scheme != "https" and not local):
        raise SubscriptionError("endpoint must be an https URL")
    keys = data.get("keys")
    if not isinstance(keys, dict):
        raise SubscriptionError("keys is missing")
    return Subscription(endpoint, _key(keys.get("p256dh"), "p256dh", 65), _key(keys.get("auth"), "auth", 16))


def subscribe(user_id: int, subscription: Subscription, user_agent: str) -> int:
    """Bind the endpoint to user_id (a browser re-subscribing replaces its keys); return the row id."""
    return db.session.execute(
        UPSERT_SQL,
        {
            "user_id": user_id,
            "endpoint": subscription.endpoint,
            "p256dh": subscription.p256dh,
            "auth": subscription.auth,
            "user_agent": user_agent[:500],
        },
    ).scalar_one()


def unsubscribe(user_id: int, endpoint: str) -> bool:
    """Delete the user's own subscription for endpoint; False when the user has none there."""
    return db.session.execute(DELETE_SQL, {"user_id": user_id, "endpoint": endpoint}).rowcount > 0


def record_outcome(conn, reached: tuple[str, ...], gone: tuple[str, ...]) -> None:
    """Stamp endpoints that accepted a message, and invalidate the ones the push service says are gone."""
    if gone:
        conn.execute(GONE_SQL, {"endpoints": list(gone)})
    if reached:
        conn.execute(REACHED_SQL, {"endpoints": list(reached)})
