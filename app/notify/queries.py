"""Reads for the notify pipeline: existing rows by dedupe key, one notification with its ledger and events."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from app.extensions import db
from app.pagination import is_id
from app.workflows.trace import notification_trace

EXISTING_SQL = sa.text(
    """
SELECT user_id, id, in_app FROM notifications
WHERE user_id = ANY(CAST(:user_ids AS bigint[])) AND dedupe_key = :dedupe_key
"""
)

NOTIFICATION_SQL = sa.text(
    """
SELECT n.id, u.external_id AS recipient, n.type, n.title, n.body, n.link_path AS link, n.data,
       n.dedupe_key, n.in_app, n.read_at, n.archived_at, n.created_at, n.event_count, n.actor_count,
       n.window_ends_at, n.workflow_version_id, u.timezone, n.actions AS buttons,
       CASE WHEN n.actions IS NOT NULL THEN (
         SELECT jsonb_object_agg(c.name, jsonb_build_object('state', c.state, 'clicked_at', c.clicked_at, 'via', c.via))
         FROM notification_action_clicks c WHERE c.user_id = n.user_id AND c.notification_id = n.id) END AS clicks
FROM notifications n
JOIN users u ON u.id = n.user_id
WHERE n.id = :id AND n.api_key_id = :api_key_id
"""
)

DELIVERIES_SQL = sa.text(
    """
SELECT id, channel, status, attempts, last_error, error_kind, skip_reason, sent_at, next_attempt_at, updated_at,
       provider_status, provider_status_at, route_rank, workflow_step_id
FROM notification_deliveries
WHERE notification_id = :id
ORDER BY route_rank NULLS LAST, channel
"""
)

# What the e-mail provider reported about each delivery (app/hooks), oldest first, capped per notification.
PROVIDER_EVENTS_SQL = sa.text(
    """
SELECT delivery_id, provider, event, occurred_at, received_at, detail
FROM provider_events
WHERE delivery_id = ANY(CAST(:ids AS bigint[]))
ORDER BY occurred_at, id
LIMIT :limit
"""
)
PROVIDER_EVENTS_SHOWN = 200


# An aggregated row's raw events (capped: the count on the row is the total).
EVENTS_SQL = sa.text(
    """
SELECT dedupe_key, actor_id, actor_name, data, created_at FROM notification_events
WHERE notification_id = :id
ORDER BY id
LIMIT :limit
"""
)
EVENTS_SHOWN = 1000


def notification_events(notification_id: int) -> list[dict]:
    """Return the events an aggregated notification holds, oldest first (an empty list for others)."""
    rows = db.session.execute(EVENTS_SQL, {"id": notification_id, "limit": EVENTS_SHOWN}).mappings()
    return [
        {
            "dedupe_key": row["dedupe_key"],
            "actor": {"id": row["actor_id"], "name": row["actor_name"]} if row["actor_id"] else None,
            "data": row["data"],
            "created_at": row["created_at"],
        }
        for row in rows
    ]


def existing_notifications(user_ids: Sequence[int], dedupe_key: str) -> dict[int, tuple[int, bool]]:
    """Return {user_id: (notification id, in_app)} for the rows these users already have under dedupe_key."""
    rows = db.session.execute(EXISTING_SQL, {"user_ids": list(user_ids), "dedupe_key": dedupe_key})
    return {row.user_id: (row.id, row.in_app) for row in rows}


def notification_with_deliveries(notification_id: int, *, api_key_id: int) -> dict | None:
    """Return the notification api_key_id created, with its per-channel delivery state; None for any other id."""
    if not is_id(notification_id):
        return None
    params = {"id": notification_id, "api_key_id": api_key_id}
    row = db.session.execute(NOTIFICATION_SQL, params).mappings().first()
    if row is None:
        return None
    deliveries = [dict(d) for d in db.session.execute(DELIVERIES_SQL, {"id": notification_id}).mappings()]
    reported: dict[int, list[dict]] = {d["id"]: [] for d in deliveries}
    if reported:
        params = {"ids": list(reported), "limit": PROVIDER_EVENTS_SHOWN}
        for event in db.session.execute(PROVIDER_EVENTS_SQL, params).mappings():
            reported[event["delivery_id"]].append(dict(event))
    for delivery in deliveries:
        delivery["provider_events"] = reported[delivery["id"]]
    workflow = notification_trace(row, deliveries)
    clicks = row["clicks"] or {}
    actions = [{**button, **clicks.get(button.get("action"), {})} for button in row["buttons"] or ()]
    return {**row, "deliveries": deliveries, "events": notification_events(notification_id), "workflow": workflow,
            "actions": actions}  # fmt: skip
