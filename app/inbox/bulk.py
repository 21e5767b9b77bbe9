"""Bulk inbox actions (issue 33): mark read, archive or delete a selection or a whole list, and undo them.

Each action is ONE statement over the set: it locks the member's rows it picks, changes them, records their state
before in inbox_undo under a fresh token, and (read, delete) skips their pending escalations like a single read.

Why the action is applied at once, with an undo token, rather than 10 s later: the badge, the counts API and the
list are right the moment the toast appears, in every tab and bell (they all read the table), and a reload or a
closed tab cannot lose or replay it. Undo puts back exactly the rows the token names, and only those still as the
action left them (a row archived since a bulk "read" stays archived). Skipped escalations are not re-armed.

Deleting hides the row from the member at once (in_app = false and read: out of every list and the unread index,
the same state a type the member turned off leaves). Once the undo time has passed the sweeper drops the undo rows
and, unless INBOX_DELETE_KEEPS_FOR_RETENTION, removes the row itself (one with a delivery still pending, leased or
in the DLQ stays hidden until the retention rules take it, as they would any read row).

Every statement names user_id, so another member's ids change nothing (they are ignored, like ids that no longer
exist); with tenant_id (a tenant-scoped feed token) only that tenant's rows are touched.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import sqlalchemy as sa
from flask import current_app

from app.devices import badge as phone_badge
from app.extensions import db
from app.inbox.queries import FILTERS
from app.live.publish import badge_after_commit
from app.webhooks import service as webhooks

ACTIONS = ("read", "archive", "delete")
# Lists a "whole list" action may act on (a snoozed row is not the member's to sweep up in bulk).
ALL_FILTERS = ("all", "unread", "archived")
# The server accepts Undo this much longer than the toast lasts (a slow network, a late click).
UNDO_GRACE_SECONDS = 5

# Which rows each action changes (it leaves the others alone, so a repeat changes nothing), and how.
GUARDS = {"read": "n.read_at IS NULL", "archive": "n.archived_at IS NULL", "delete": "true"}
# "Delete all" is "delete all read": an unread row is deleted only when the member selected it.
ALL_GUARDS = {**GUARDS, "delete": "n.read_at IS NOT NULL"}
CHANGES = {
    "read": "read_at = now()",
    "archive": "archived_at = now(), read_at = COALESCE(n.read_at, now())",
    # Cleared snooze: the sweeper must never wake (and make unread) a row the member deleted.
    "delete": "in_app = false, read_at = COALESCE(n.read_at, now()), snoozed_until = NULL",
}
# Reading (or deleting) cancels escalations waiting to see whether the row gets read, as a single read does.
SKIP_ESCALATIONS = """, escalations AS (
  UPDATE notification_deliveries d
  SET status = 'skipped', skip_reason = 'read', locked_until = NULL, updated_at = now()
  FROM picked p
  WHERE d.notification_id = p.id AND p.read_at IS NULL AND d.status = 'pending' AND d.escalation IS NOT NULL)"""

_ACTION_SQL = """
WITH picked AS (
  SELECT n.id, n.read_at, n.archived_at, n.snoozed_until FROM notifications n
  WHERE n.user_id = :user_id AND n.in_app AND {rows}{scope} AND {guard}
  ORDER BY n.id
  FOR UPDATE
), changed AS (
  UPDATE notifications n SET {change}
  FROM picked p WHERE n.id = p.id AND n.user_id = :user_id
  RETURNING n.id
), undo AS (
  INSERT INTO inbox_undo (user_id, token, notification_id, action, read_at, archived_at, snoozed_until, expires_at)
  SELECT :user_id, :token, p.id, :action, p.read_at, p.archived_at, p.snoozed_until,
         now() + make_interval(secs => :keep_seconds)
  FROM picked p
){escalations}
SELECT id FROM changed ORDER BY id
"""

BIGINT_MAX = 2**63 - 1
SELECTED_ROWS = "n.id = ANY (CAST(:ids AS bigint[]))"
TENANT_SCOPE = " AND n.tenant_id = :tenant_id"


def _action_sql(action: str, rows: str, guard: str, scoped: bool) -> sa.TextClause:
    return sa.text(
        _ACTION_SQL.format(
            rows=rows,
            scope=TENANT_SCOPE if scoped else "",
            guard=guard,
            change=CHANGES[action],
            escalations=SKIP_ESCALATIONS if action != "archive" else "",
        )
    )


# Undo: the token's rows (the member's own, not expired) go back to their state before, if still as the action
# left them; the token is used up either way.
UNDO_SQL = sa.text(
    """
WITH used AS (
  DELETE FROM inbox_undo u
  WHERE u.user_id = :user_id AND u.token = :token AND u.expires_at > now()
  RETURNING u.notification_id, u.action, u.read_at, u.archived_at, u.snoozed_until
)
UPDATE notifications n
SET in_app = true,
    read_at = u.read_at,
    archived_at = CASE WHEN u.action = 'archive' THEN u.archived_at ELSE n.archived_at END,
    snoozed_until = CASE WHEN u.action = 'delete' THEN u.snoozed_until ELSE n.snoozed_until END
FROM used u
WHERE n.id = u.notification_id AND n.user_id = :user_id
  AND (CAST(:tenant_id AS bigint) IS NULL OR n.tenant_id = :tenant_id)
  AND CASE u.action WHEN 'read' THEN n.read_at IS NOT NULL AND n.archived_at IS NULL AND n.in_app
                    WHEN 'archive' THEN n.archived_at IS NOT NULL AND n.in_app
                    ELSE NOT n.in_app END
RETURNING n.id
"""
)

# The sweeper's step: undo rows past their time go (a batch, SKIP LOCKED against an Undo in flight), and a deleted
# row goes with them unless kept for retention or one of its deliveries is still pending, leased, in the DLQ or
# waiting for a digest (the cascade would take those along: the same rule as the retention walk).
FINISH_SQL = sa.text(
    """
WITH due AS (
  SELECT user_id, token, notification_id, action FROM inbox_undo
  WHERE expires_at <= now()
  ORDER BY expires_at
  LIMIT :limit
  FOR UPDATE SKIP LOCKED
), dropped AS (
  DELETE FROM inbox_undo u USING due
  WHERE u.user_id = due.user_id AND u.token = due.token AND u.notification_id = due.notification_id
  RETURNING u.user_id, u.notification_id, u.action
), removed AS (
  DELETE FROM notifications n USING dropped d
  WHERE :purge AND d.action = 'delete' AND n.id = d.notification_id AND n.user_id = d.user_id AND NOT n.in_app
    AND NOT EXISTS (SELECT 1 FROM notification_deliveries x
                    WHERE x.notification_id = n.id
                      AND (x.status IN ('pending', 'sending', 'failed')
                           OR (x.skip_reason = 'digested' AND x.digest_id IS NULL)))
  RETURNING n.id
)
SELECT (SELECT count(*) FROM dropped) AS dropped, (SELECT count(*) FROM removed) AS removed
"""
)


class TooManyIds(ValueError):
    """More ids than INBOX_BULK_MAX_IDS: refused whole, nothing changed."""

    def __init__(self, limit: int):
        super().__init__(limit)
        self.limit = limit


@dataclass(frozen=True)
class BulkResult:
    """What one bulk action changed: the ids, and the token that undoes exactly them (None when nothing changed)."""

    action: str
    ids: list[int]
    token: str | None

    @property
    def count(self) -> int:
        """How many rows changed."""
        return len(self.ids)


def max_ids() -> int:
    """The most ids one request may name (INBOX_BULK_MAX_IDS)."""
    return current_app.config["INBOX_BULK_MAX_IDS"]


def undo_seconds() -> int:
    """How long the undo toast lasts (INBOX_UNDO_SECONDS)."""
    return current_app.config["INBOX_UNDO_SECONDS"]


def _apply(user_id: int, action: str, statement: sa.TextClause, params: dict, whole_list: bool) -> BulkResult:
    if action not in ACTIONS:
        raise ValueError(f"unknown bulk action {action!r}")
    token = secrets.token_urlsafe(16)
    keep = undo_seconds() + UNDO_GRACE_SECONDS
    args = {**params, "user_id": user_id, "token": token, "action": action, "keep_seconds": keep}
    ids = list(db.session.execute(statement, args).scalars())
    if not ids:
        return BulkResult(action, [], None)
    badge_after_commit([user_id])  # every tab and bell recounts once, after the commit
    phone_badge.after_change(user_id)
    event = {"read": "notification.read", "archive": "notification.archived"}.get(action)
    if event and whole_list:  # one event for a whole list, as read-all sends
        webhooks.emit(event, {"user_id": user_id, "all": True, "count": len(ids)})
    elif event:
        webhooks.emit_many(event, [{"user_id": user_id, "notification_id": i} for i in ids])
    return BulkResult(action, ids, token)


def act_on_ids(user_id: int, action: str, ids: list[int], tenant_id: int | None = None) -> BulkResult:
    """Apply action to the member's rows among ids (others' and unknown ids are ignored); TooManyIds past the cap."""
    if len(set(ids)) > max_ids():
        raise TooManyIds(max_ids())
    unique = sorted({i for i in ids if 0 < i <= BIGINT_MAX})  # no row has another id: ignored like unknown ones
    statement = _action_sql(action, SELECTED_ROWS, GUARDS[action], tenant_id is not None)
    return _apply(user_id, action, statement, {"ids": unique, "tenant_id": tenant_id}, whole_list=False)


def act_on_all(user_id: int, action: str, filter_name: str = "all", tenant_id: int | None = None) -> BulkResult:
    """Apply action to every row of one list: read all, archive all, or delete all *read* rows."""
    if filter_name not in ALL_FILTERS:
        raise ValueError(f"bulk actions take the lists {ALL_FILTERS}, not {filter_name!r}")
    statement = _action_sql(action, f"({FILTERS[filter_name]})", ALL_GUARDS[action], tenant_id is not None)
    return _apply(user_id, action, statement, {"tenant_id": tenant_id}, whole_list=True)


def undo(user_id: int, token: str, tenant_id: int | None = None) -> int:
    """Put back the rows of the member's own token (used once, until it expires); return how many came back.

    With tenant_id (a tenant-scoped feed token) only that tenant's rows come back.
    """
    params = {"user_id": user_id, "token": token, "tenant_id": tenant_id}
    restored = db.session.execute(UNDO_SQL, params).rowcount
    if restored:
        badge_after_commit([user_id])
        phone_badge.after_change(user_id)
    return restored


@dataclass(frozen=True)
class Finished:
    """What one sweeper step did: undo rows dropped, deleted notifications removed for good."""

    dropped: int
    removed: int


def finish_expired(limit: int) -> Finished:
    """Drop up to limit expired undo rows; remove their deleted notifications unless kept for retention."""
    purge = not current_app.config["INBOX_DELETE_KEEPS_FOR_RETENTION"]
    row = db.session.execute(FINISH_SQL, {"limit": limit, "purge": purge}).one()
    return Finished(row.dropped, row.removed)
