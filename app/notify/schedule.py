"""Scheduled sends and cancellation: rows wait in scheduled_notifications, then are released set-based.

schedule() stores a request per recipient (nothing in notifications, so no badge, inbox row or
delivery exists before send_at). release_due() moves a batch of due rows in one statement: it deletes
them (SKIP LOCKED, so two sweepers release each row exactly once) and feeds them to the ingest's own
CTEs (statement.notify_ctes: preferences, mutes and dedupe keys resolved in SQL at release time), then
registers the badge events and delivery jobs to follow the commit. cancel() removes a key's scheduled
rows and skips its pending deliveries and waiting escalations, only for the API key that sent them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache

import sqlalchemy as sa

from app.extensions import db
from app.live.publish import badge_after_commit
from app.notify.service import NotifyError, check_tenant, unique
from app.notify.statement import ROW_API_KEY, ROW_CONTENT, WANTED_SQL, notify_ctes
from app.queueing import delivery_queue, enqueue_deliveries_after_commit

SCHEDULE_SQL = sa.text(
    f"""
WITH wanted AS (
  {WANTED_SQL["external_id"]}
),
stored AS (
  -- All or nothing, as the immediate ingest: one unknown recipient and nothing is scheduled.
  INSERT INTO scheduled_notifications (user_id, type, title, body, link_path, data, dedupe_key, group_key,
                                       cancellation_key, api_key_id, send_at, channels, channel_mode, tenant_id)
  SELECT w.user_id, t.type, :title, :body, :link_path, CAST(:data AS jsonb), :dedupe_key, :group_key,
         :cancellation_key, :api_key_id, :send_at, CAST(:route AS text[]), CAST(:mode AS text),
         CAST(:tenant AS bigint)
  FROM wanted w
  JOIN notification_types t ON t.type = :type
  WHERE w.user_id IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM wanted WHERE user_id IS NULL)
    -- The dedupe key already names a notification: the release would drop it anyway.
    AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.user_id = w.user_id AND n.dedupe_key = :dedupe_key)
  ON CONFLICT (user_id, dedupe_key) DO NOTHING
  RETURNING user_id
)
SELECT w.ref, w.user_id, s.user_id IS NOT NULL AS scheduled,
       (SELECT priority FROM notification_types WHERE type = :type) AS priority
FROM wanted w
LEFT JOIN stored s ON s.user_id = w.user_id
ORDER BY w.ord
"""
)


@cache
def _release_sql() -> sa.TextClause:
    """The release statement (built once: its channels come from the registry)."""
    return sa.text(
        f"""
WITH due AS (
  DELETE FROM scheduled_notifications
  WHERE id IN (
    SELECT id FROM scheduled_notifications
    WHERE send_at <= now()
    ORDER BY send_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
  )
  RETURNING *
),
recipients AS (
  SELECT d.user_id, u.email, d.type, d.title, d.body, d.link_path, d.dedupe_key, d.data,
         CAST(NULL AS bigint) AS campaign_id, d.group_key, d.cancellation_key, d.api_key_id,
         d.channels AS route, d.channel_mode AS mode, d.tenant_id AS tenant
  FROM due d
  JOIN users u ON u.id = d.user_id
),
prefs AS (
  SELECT p.user_id, p.type, p.channel, p.enabled
  FROM notification_preferences p
  JOIN (SELECT DISTINCT user_id, type FROM due) k ON k.user_id = p.user_id AND k.type = p.type
),
{notify_ctes(ROW_API_KEY, ROW_CONTENT, prefs_by_type=True, tenant_ref="r.tenant")}
-- Arrays per group, nothing joined to the data-modifying CTEs' output (see statement._notify_statement).
SELECT 'notification' AS kind, i.type AS key, i.title, i.in_app,
       array_agg(i.id) AS ids, array_agg(i.user_id) AS refs
FROM inserted i
GROUP BY i.type, i.title, i.in_app
UNION ALL
SELECT 'delivery', d.channel, NULL, NULL, array_agg(d.id), array_agg(d.notification_id)
FROM deliveries d
WHERE d.status = 'pending' AND d.next_attempt_at <= now()
GROUP BY d.channel
UNION ALL
SELECT 'due', NULL, NULL, NULL, ARRAY[count(*)], NULL FROM due
"""
    )


# For this transaction only: the CTE chain's cost estimate trips PostgreSQL's JIT, whose compile time
# (~0.1 s) exceeds its gain here, and a batch's `cells` would spill to disk under the default work_mem.
TUNE_SQL = sa.text("SELECT set_config('jit', 'off', true), set_config('work_mem', '64MB', true)")
PRIORITIES_SQL = sa.text("SELECT type, priority FROM notification_types WHERE type = ANY(CAST(:types AS text[]))")

CANCEL_SQL = sa.text(
    """
WITH removed AS (
  DELETE FROM scheduled_notifications
  WHERE cancellation_key = :key AND api_key_id = :api_key_id
  RETURNING id
),
skipped AS (
  UPDATE notification_deliveries d
  SET status = 'skipped', skip_reason = 'cancelled', updated_at = now()
  FROM notifications n
  WHERE n.cancellation_key = :key AND n.api_key_id = :api_key_id
    AND d.notification_id = n.id AND d.status = 'pending'
  RETURNING d.escalation
)
SELECT (SELECT count(*) FROM removed) AS scheduled,
       (SELECT count(*) FROM skipped WHERE escalation IS NULL) AS deliveries,
       (SELECT count(*) FROM skipped WHERE escalation IS NOT NULL) AS escalations
"""
)


@dataclass(frozen=True)
class ScheduleResult:
    """The type's priority and, per recipient in request order, (ref, newly scheduled)."""

    priority: str
    recipients: list[tuple[str, bool]]


@dataclass(frozen=True)
class Cancelled:
    """What a cancellation stopped."""

    scheduled: int
    deliveries: int
    escalations: int


def schedule(
    refs: Sequence[str],
    *,
    type_: str,
    title: str,
    body: str,
    dedupe_key: str,
    send_at: datetime,
    link_path: str | None = None,
    data: dict | None = None,
    api_key_id: int | None = None,
    group_key: str | None = None,
    cancellation_key: str | None = None,
    channels: Sequence[str] | None = None,
    channel_mode: str | None = None,
    tenant_id: int | None = None,
) -> ScheduleResult:
    """Store one scheduled notification per recipient (external ids), in the caller's transaction.

    A recipient who already has a notification or a scheduled one under dedupe_key is reported as not
    new and keeps what it has. Raises NotifyError for an unknown type or any unknown recipient, and
    OutsideTenant (nothing stored) for any recipient who is not a member of tenant_id's tenant.
    """
    refs = unique(refs)
    check_tenant(refs, tenant_id, "external_id")
    params = {
        "refs": refs,
        "type": type_,
        "title": title,
        "body": body,
        "link_path": link_path,
        "data": json.dumps(data or {}, separators=(",", ":")),
        "dedupe_key": dedupe_key,
        "group_key": group_key,
        "cancellation_key": cancellation_key,
        "api_key_id": api_key_id,
        "send_at": send_at,
        "route": list(channels) if channels is not None else None,
        "mode": channel_mode,
        "tenant": tenant_id,
    }
    rows = db.session.execute(SCHEDULE_SQL, params).all()
    unknown = [row.ref for row in rows if row.user_id is None]
    priority = rows[0].priority if rows else None
    if priority is None or unknown:
        raise NotifyError(type_ if priority is None else None, unknown)
    return ScheduleResult(priority, [(row.ref, row.scheduled) for row in rows])


def release_due(limit: int) -> int:
    """Release up to limit due scheduled rows into notifications and deliveries; return how many were due.

    Rows whose dedupe key already names a notification are dropped (the key still applies). After the
    commit, the new pending deliveries are enqueued on their type's queue and the users' badges told.
    """
    db.session.execute(TUNE_SQL)
    rows = db.session.execute(_release_sql(), {"limit": limit}).all()
    released = [row for row in rows if row.kind == "notification"]
    types = {row.key for row in released}
    priority_of_type = dict(db.session.execute(PRIORITIES_SQL, {"types": list(types)}).all()) if types else {}
    for row in released:
        if row.in_app:
            badge_after_commit(row.refs, toast_title=row.title)
    # Each delivery goes on its notification's type's queue (arrays, so 10,000 rows cost little Python).
    priority_of = {n: priority_of_type[row.key] for row in released for n in row.ids} if len(types) > 1 else None
    for row in rows:
        if row.kind != "delivery":
            continue
        pending: dict[str, list[int]] = defaultdict(list)
        if priority_of is None:  # the usual batch: one type, one queue
            pending[priority_of_type[next(iter(types))]] = row.ids
        else:
            for delivery_id, notification_id in zip(row.ids, row.refs, strict=True):
                pending[priority_of[notification_id]].append(delivery_id)
        for priority, ids in pending.items():
            enqueue_deliveries_after_commit(delivery_queue(priority), row.key, ids)
    return next(row.ids[0] for row in rows if row.kind == "due")


def cancel(key: str, *, api_key_id: int) -> Cancelled:
    """Cancel what has not happened yet of api_key_id's notifications under key; idempotent."""
    row = db.session.execute(CANCEL_SQL, {"key": key, "api_key_id": api_key_id}).one()
    return Cancelled(row.scheduled, row.deliveries, row.escalations)
