"""Provider events in: store each verified event once, matched to its delivery, and act on it.

One request's events are handled set-based in the caller's transaction (flushed, never committed):
1. their deliveries are found by the message id recorded at send time (an e-mail delivery's
   provider_message_id without angle brackets, through notification_deliveries_message_idx);
2. the events go into provider_events, ON CONFLICT (provider, provider_event_id) DO NOTHING, so a
   resent event is stored and acted on once; an event whose message id matches no delivery is stored with
   delivery_id NULL (counted by /metrics as unknown), never an error;
3. only the events just stored act: the delivery's provider_status rises (delivered < bounced <
   complained, never down, whatever order the provider sends them in); a hard bounce suppresses the
   address; a complaint suppresses it and turns that user's e-mail off for every type that is not
   mandatory; soft bounces, opens and clicks are recorded only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import sqlalchemy as sa

from app import keyspace
from app.extensions import db, redis
from app.hooks.formats import ProviderEventIn
from app.models import PROVIDER_STATUSES
from app.suppressions.service import suppress
from app.webhooks import service as webhooks

DELIVERIES_SQL = sa.text(
    """
SELECT btrim(d.provider_message_id, '<>') AS message_id, d.id, d.user_id, u.email
FROM notification_deliveries d
JOIN users u ON u.id = d.user_id
WHERE btrim(d.provider_message_id, '<>') = ANY(CAST(:message_ids AS text[]))
  AND d.provider_message_id IS NOT NULL AND d.channel = 'email'
ORDER BY d.id
"""
)

INSERT_SQL = sa.text(
    """
INSERT INTO provider_events (delivery_id, user_id, provider, provider_event_id, event, message_id, detail, occurred_at)
SELECT v.delivery_id, coalesce(v.user_id, 0), v.provider, v.event_id, v.event, v.message_id, v.detail, v.occurred_at
FROM unnest(CAST(:delivery_ids AS bigint[]), CAST(:user_ids AS bigint[]), CAST(:providers AS text[]),
            CAST(:event_ids AS text[]), CAST(:events AS text[]), CAST(:message_ids AS text[]),
            CAST(:details AS jsonb[]), CAST(:occurred AS timestamptz[]))
     AS v(delivery_id, user_id, provider, event_id, event, message_id, detail, occurred_at)
ON CONFLICT (provider, provider_event_id, user_id) DO NOTHING
RETURNING provider_event_id
"""
)

# The status only rises: a 'delivered' that arrives after a bounce (webhooks come in any order) changes nothing.
STATUS_SQL = sa.text(
    """
UPDATE notification_deliveries d
SET provider_status = v.status, provider_status_at = v.at
FROM unnest(CAST(:ids AS bigint[]), CAST(:statuses AS text[]), CAST(:ats AS timestamptz[])) AS v(id, status, at)
WHERE d.id = v.id
  AND (d.provider_status IS NULL
       OR array_position(CAST(:order AS text[]), d.provider_status) < array_position(CAST(:order AS text[]), v.status))
"""
)

# Only deviations from a type's default are stored: e-mail off is a row for types on by default, and no row
# (dropping an "on" deviation) for types off by default. Mandatory types are never touched.
COMPLAINT_PREFS_SQL = sa.text(
    """
WITH dropped AS (
  DELETE FROM notification_preferences p
  USING notification_types t
  WHERE p.user_id = :user_id AND p.channel = 'email' AND t.type = p.type AND NOT t.mandatory AND NOT t.default_email
)
INSERT INTO notification_preferences (user_id, type, channel, enabled)
SELECT :user_id, t.type, 'email', false FROM notification_types t WHERE NOT t.mandatory AND t.default_email
ON CONFLICT (user_id, type, channel) DO UPDATE SET enabled = false
"""
)

# What an event makes of its delivery's provider_status (None: recorded only).
STATUS_OF = {"delivered": "delivered", "bounced": "bounced", "complained": "complained"}


@dataclass(frozen=True)
class _Match:
    delivery_id: int
    user_id: int
    email: str | None


def claim_mailgun_token(token: str, ttl_seconds: float) -> bool:
    """Record a Mailgun token; False when it was seen within ttl_seconds (a replay). Raises RedisError."""
    digest = hashlib.sha256(token.encode()).hexdigest()
    key = keyspace.key("hooks", "mailgun-token", digest)
    return bool(redis.client().set(key, b"1", nx=True, ex=max(int(ttl_seconds), 1)))


def release_mailgun_token(token: str) -> None:
    """Forget a token whose request was not recorded after all, so Mailgun's retry of it is not a replay."""
    digest = hashlib.sha256(token.encode()).hexdigest()
    redis.client().delete(keyspace.key("hooks", "mailgun-token", digest))


def _matches(events: list[ProviderEventIn]) -> dict[str, _Match]:
    message_ids = sorted({m for event in events for m in event.message_ids})
    if not message_ids:
        return {}
    found: dict[str, _Match] = {}
    for row in db.session.execute(DELIVERIES_SQL, {"message_ids": message_ids}):
        found.setdefault(row.message_id, _Match(row.id, row.user_id, row.email))
    return found


def _match(event: ProviderEventIn, found: dict[str, _Match]) -> _Match | None:
    return next((found[m] for m in event.message_ids if m in found), None)


def record(events: list[ProviderEventIn]) -> dict:
    """Store the events once each and apply what the new ones mean; return the counts for the answer."""
    counts = {"received": len(events), "recorded": 0, "duplicates": 0, "unknown": 0}
    if not events:
        return counts
    found = _matches(events)
    matched = [(event, _match(event, found)) for event in events]
    params = {
        "delivery_ids": [m.delivery_id if m else None for _, m in matched],
        "user_ids": [m.user_id if m else None for _, m in matched],
        "providers": [event.provider for event, _ in matched],
        "event_ids": [event.event_id for event, _ in matched],
        "events": [event.event for event, _ in matched],
        "message_ids": [event.message_id for event, _ in matched],
        "details": [json.dumps({**event.detail, "recipient": event.recipient}) for event, _ in matched],
        "occurred": [event.occurred_at for event, _ in matched],
    }
    new_ids = set(db.session.execute(INSERT_SQL, params).scalars())
    fresh: list[tuple[ProviderEventIn, _Match | None]] = []
    for event, match in matched:
        if event.event_id in new_ids:
            new_ids.discard(event.event_id)  # the same event twice in one request acts once
            fresh.append((event, match))
    counts["recorded"] = len(fresh)
    counts["duplicates"] = len(events) - len(fresh)
    counts["unknown"] = sum(1 for _, match in fresh if match is None)
    _apply(fresh)
    return counts


def _apply(fresh: list[tuple[ProviderEventIn, _Match | None]]) -> None:
    statuses: dict[int, tuple[str, object]] = {}
    for event, match in fresh:
        status = STATUS_OF.get(event.event)
        if match is not None and status is not None:
            current = statuses.get(match.delivery_id)
            if current is None or PROVIDER_STATUSES.index(current[0]) < PROVIDER_STATUSES.index(status):
                statuses[match.delivery_id] = (status, event.occurred_at)
    if statuses:
        ids = sorted(statuses)
        db.session.execute(
            STATUS_SQL,
            {
                "ids": ids,
                "statuses": [statuses[i][0] for i in ids],
                "ats": [statuses[i][1] for i in ids],
                "order": list(PROVIDER_STATUSES),
            },
        )
    complained_users: set[int] = set()
    for event, match in fresh:
        if event.event not in ("bounced", "complained") or match is None:
            continue  # an unknown message id is counted only: it may be mail some other sender's
        # The address the provider reports is the one that bounced (the user may have changed theirs since).
        address = event.recipient or match.email or ""
        reason = "bounce" if event.event == "bounced" else "complaint"
        if address.strip():
            detail = event.detail.get("reason") or event.detail.get("description") or event.detail.get("type") or ""
            suppress(address, reason, f"{event.provider}: {detail}".strip(": ")[:500])
        if event.event == "complained":
            complained_users.add(match.user_id)
    for user_id in sorted(complained_users):
        db.session.execute(COMPLAINT_PREFS_SQL, {"user_id": user_id})
    _emit(fresh)


# The product hears of deliveries and bounces in the same transaction that records them (the webhook outbox).
WEBHOOK_EVENTS = {"delivered": "delivery.delivered", "bounced": "delivery.bounced"}


def _emit(fresh: list[tuple[ProviderEventIn, _Match | None]]) -> None:
    for kind, event_type in WEBHOOK_EVENTS.items():
        items = [
            {"delivery_id": match.delivery_id, "user_id": match.user_id, "provider": event.provider,
             "message_id": event.message_id, "occurred_at": event.occurred_at.isoformat()}
            for event, match in fresh if event.event == kind and match is not None
        ]  # fmt: skip
        if items:
            webhooks.emit_many(event_type, items)
