"""Push writes: validate and upsert a browser's subscription, delete it, record what the push service said.

A subscription's endpoint is where the workers will POST: it must be a push service this server
sends to (app/providers/endpoints.py). One user keeps at most PUSH_MAX_SUBSCRIPTIONS_PER_USER (the
oldest goes), and an endpoint stays with the user who subscribed it first.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from urllib.parse import urlsplit

import sqlalchemy as sa

from app.extensions import db
from app.providers.endpoints import EndpointPolicy, EndpointRefused

MAX_ENDPOINT_CHARS = 2048

# Serialises one user's subscribes, so two at once cannot both keep the user under the cap. NO KEY
# UPDATE: inserts elsewhere that reference the user (their FK check) are not held up.
LOCK_USER_SQL = sa.text("SELECT 1 FROM users WHERE id = :user_id FOR NO KEY UPDATE")

# A browser re-subscribing replaces its keys; an endpoint of another user is left alone (no row returned).
UPSERT_SQL = sa.text(
    """
INSERT INTO push_subscriptions (user_id, endpoint, p256dh, auth, user_agent)
VALUES (:user_id, :endpoint, :p256dh, :auth, :user_agent)
ON CONFLICT (endpoint) DO UPDATE
SET p256dh = EXCLUDED.p256dh, auth = EXCLUDED.auth, user_agent = EXCLUDED.user_agent, invalidated_at = NULL
WHERE push_subscriptions.user_id = EXCLUDED.user_id
RETURNING id
"""
)

# Beyond the cap, dead subscriptions go first, then the oldest: the member's subscriptions ranked live and newest
# first, and every one ranked past :keep deleted, in one statement.
TRIM_SQL = sa.text(
    """
DELETE FROM push_subscriptions WHERE id IN (
  SELECT id FROM (
    SELECT id, row_number() OVER (ORDER BY invalidated_at IS NULL DESC, created_at DESC, id DESC) AS rank
    FROM push_subscriptions WHERE user_id = :user_id
  ) ranked
  WHERE rank > :keep
)
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


class EndpointTaken(Exception):
    """The endpoint is subscribed by another user; it is not moved."""


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


def parse_subscription(data, policy: EndpointPolicy) -> Subscription:
    """Validate {endpoint, keys: {p256dh, auth}}: SubscriptionError for a malformed one, EndpointRefused for an
    endpoint that is not a push service this server sends to (its name is resolved and every address checked).
    """
    if not isinstance(data, dict):
        raise SubscriptionError("send the subscription as a JSON object")
    endpoint = data.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint or len(endpoint) > MAX_ENDPOINT_CHARS:
        raise SubscriptionError("endpoint is missing or too long")
    parts = urlsplit(endpoint)
    if (
        not parts.hostname
        or parts.scheme not in ("https", "http")
        or (parts.scheme == "http" and not policy.allow_http)
    ):
        raise SubscriptionError("endpoint must be an https URL")
    keys = data.get("keys")
    if not isinstance(keys, dict):
        raise SubscriptionError("keys is missing")
    subscription = Subscription(endpoint, _key(keys.get("p256dh"), "p256dh", 65), _key(keys.get("auth"), "auth", 16))
    _, host, port = policy.check_url(endpoint)
    try:
        policy.resolve(host, port)
    except OSError as exc:  # socket.gaierror: no push service answers at a name that does not resolve
        raise EndpointRefused(f"{host} does not resolve") from exc
    return subscription


def subscribe(user_id: int, subscription: Subscription, user_agent: str, keep: int) -> int:
    """Bind the endpoint to user_id, keeping the user's newest `keep` subscriptions; return the row id.

    EndpointTaken when another user has the endpoint (it stays theirs).
    """
    db.session.execute(LOCK_USER_SQL, {"user_id": user_id})
    row_id = db.session.execute(
        UPSERT_SQL,
        {
            "user_id": user_id,
            "endpoint": subscription.endpoint,
            "p256dh": subscription.p256dh,
            "auth": subscription.auth,
            "user_agent": user_agent[:500],
        },
    ).scalar_one_or_none()
    if row_id is None:
        raise EndpointTaken(subscription.endpoint)
    db.session.execute(TRIM_SQL, {"user_id": user_id, "keep": max(keep, 1)})
    return row_id


def unsubscribe(user_id: int, endpoint: str) -> bool:
    """Delete the user's own subscription for endpoint; False when the user has none there."""
    return db.session.execute(DELETE_SQL, {"user_id": user_id, "endpoint": endpoint}).rowcount > 0


def record_outcome(conn, reached: tuple[str, ...], gone: tuple[str, ...]) -> None:
    """Stamp endpoints that accepted a message, and invalidate the ones the push service says are gone."""
    if gone:
        conn.execute(GONE_SQL, {"endpoints": list(gone)})
    if reached:
        conn.execute(REACHED_SQL, {"endpoints": list(reached)})
