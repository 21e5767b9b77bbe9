"""Action writes: a member's click on a named action (once only) and the product's answer to it.

A click is one INSERT … ON CONFLICT DO NOTHING on (user_id, notification_id, name): only the first inserts, so
only the first queues the webhook event `notification.action` (in the same transaction: the outbox) and a
second click, a double tap or a replayed e-mail link sends nothing. Every click marks the row read. The product
answers later with PATCH /v1/notifications/<id>/actions/<name> {"state": "Approved"} (answer()): webhooks are
asynchronous, so the answer is not the receiver's reply. Nothing here commits.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from flask import current_app

from app.actions import queries
from app.extensions import db
from app.inbox import service as inbox
from app.webhooks import service as webhooks

VIA = ("inbox", "feed", "email", "push")
EVENT = "notification.action"

CLICK_SQL = sa.text(
    """
INSERT INTO notification_action_clicks (user_id, notification_id, name, clicked_at, via)
VALUES (:user_id, :id, :name, now(), :via)
ON CONFLICT (user_id, notification_id, name) DO NOTHING
RETURNING clicked_at
"""
)

# The creating API key only (as GET /v1/notifications/<id>); a row the product answers before any click is
# closed without a webhook (its button shows the state, and a click then sends nothing).
ANSWER_SQL = sa.text(
    """
INSERT INTO notification_action_clicks (user_id, notification_id, name, state, state_at)
SELECT n.user_id, n.id, :name, :state, now() FROM notifications n
WHERE n.id = :id AND n.api_key_id = :api_key_id
  AND jsonb_path_exists(n.actions, '$[*] ? (@.action == $name)', jsonb_build_object('name', CAST(:name AS text)))
ON CONFLICT (user_id, notification_id, name) DO UPDATE SET state = excluded.state, state_at = excluded.state_at
RETURNING user_id, notification_id, name, state, state_at, clicked_at, via
"""
)


@dataclass(frozen=True)
class Click:
    """What a click did: first (the webhook was queued) or a repeat, and the button's state now."""

    notification_id: int
    name: str
    label: str
    first: bool
    state: str | None


def click(user_id: int, notification_id: int, name: str, via: str, visible_only: bool = True) -> Click | None:
    """Act on the member's named action: the first click queues `notification.action`; every click marks read.

    None (nothing changed) when the notification is not the member's, is hidden (visible_only: the inbox and the
    bell), or has no action of that name.
    """
    row = queries.target(user_id, notification_id)
    if row is None or (visible_only and not row["in_app"]):
        return None
    button = queries.find(row["actions"], name)
    if button is None:
        return None
    first = db.session.execute(CLICK_SQL, {"user_id": user_id, "id": notification_id, "name": name,
                                           "via": via}).first() is not None  # fmt: skip
    default = current_app.config["DEFAULT_LOCALE"]
    if first:
        webhooks.emit(EVENT, {
            "user_id": user_id, "locale": row["locale"], "via": via,
            "notification": {"id": notification_id, "type": row["type"], "dedupe_key": row["dedupe_key"],
                             "data": row["data"]},
            "action": {"name": name, "label": button["label"]},
        })  # fmt: skip
    inbox.mark_read(user_id, notification_id)  # its own event and badge when it changed something
    found = queries.state(user_id, notification_id, name)
    label = queries.label_for(button, row["locale"], default)
    return Click(notification_id, name, label, first, found.state if found else None)


def answer(api_key_id: int, notification_id: int, name: str, state: str):
    """Record the product's state for a named action of a notification this key created; None when it has none.

    The member's open inbox shows it at its next look (the row polls while it waits, app/actions/views.py).
    """
    params = {"api_key_id": api_key_id, "id": notification_id, "name": name, "state": state}
    return db.session.execute(ANSWER_SQL, params).mappings().first()
