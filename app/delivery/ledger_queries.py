"""Ledger reads for the console: the delivery log, one delivery's timeline, the dead-letter queue.

Both lists page by keyset on the delivery id, newest first (no skipped-row scans). The DLQ reads walk
`notification_deliveries_failed_idx`, which holds failed rows only, so they cost the size of the DLQ,
not of the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from app.delivery.channels import routable_names
from app.extensions import db
from app.filters import Filters, Where, keyset_page
from app.models import DELIVERY_STATUSES
from app.pagination import Page, id_cursor, is_id
from app.sqltext import like_prefix
from app.workflows.trace import notification_trace

PAGE_SIZE = 50
LOG_STATUSES = DELIVERY_STATUSES

ROW_COLUMNS = """d.id, d.channel, d.status, d.attempts, d.provider, d.error_kind, d.last_error, d.skip_reason,
       d.provider_status, d.route_rank, d.created_at, d.updated_at, d.sent_at, d.next_attempt_at,
       n.id AS notification_id, n.type, n.title, n.campaign_id,
       u.id AS user_id, u.external_id, u.email"""

# The user filter finds at most two users through the unique indexes (external id, lower(email)),
# then walks their notifications by notifications_list_idx.
TENANT_FILTER_SQL = "n.tenant_id = (SELECT id FROM tenants WHERE key = :tenant)"
USER_FILTER_SQL = "n.user_id IN (SELECT id FROM users WHERE external_id = :user OR lower(email) = lower(:user))"


@dataclass(frozen=True)
class LogFilters(Filters):
    """What the delivery log narrows by (and when the row was created); empty values mean "any"."""

    user: str = ""
    type: str = ""
    channel: str = ""
    status: str = ""
    tenant: str = ""  # a tenant's key (issue 32): its notifications' deliveries

    def where(self) -> Where:
        """The conditions (columns of d, n)."""
        where = Where().add(USER_FILTER_SQL, user=self.user) if self.user else Where()
        if self.tenant:
            where.add(TENANT_FILTER_SQL, tenant=self.tenant)
        return (
            where.equal("n.type", "type", self.type)
            .equal("d.channel", "channel", self.channel)
            .equal("d.status", "status", self.status)
            .window("d.created_at", self.since, self.until)
        )


@dataclass(frozen=True)
class DlqFilters(Filters):
    """What the DLQ narrows by: error kind, provider, type, channel, error text, and when the row failed."""

    error_kind: str = ""
    provider: str = ""
    type: str = ""
    channel: str = ""
    q: str = ""  # the last error contains this (case-insensitive; % and _ literal)

    def where(self) -> Where:
        """The conditions, always status = 'failed' first (columns of d, n)."""
        where = (
            Where("d.status = 'failed'")
            .equal("d.error_kind", "error_kind", self.error_kind)
            .equal("d.provider", "provider", self.provider)
            .equal("n.type", "type", self.type)
            .equal("d.channel", "channel", self.channel)
        )
        if self.q:
            where.add("d.last_error ILIKE :q_contains ESCAPE '\\'", q_contains="%" + like_prefix(self.q))
        return where.window("d.updated_at", self.since, self.until)

    def conditions(self) -> tuple[list[str], dict]:
        """SQL conditions and their parameters, for statements that place them themselves (the bulk batches)."""
        return self.where().parts()

    def as_json(self) -> dict:
        """The filters as stored with a bulk operation (times as ISO strings)."""
        return {
            "error_kind": self.error_kind,
            "provider": self.provider,
            "type": self.type,
            "channel": self.channel,
            "q": self.q,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
        }

    @classmethod
    def from_json(cls, data: dict) -> DlqFilters:
        """Rebuild the filters a bulk operation stored."""
        since, until = data.get("since"), data.get("until")
        return cls(
            error_kind=data.get("error_kind") or "",
            provider=data.get("provider") or "",
            type=data.get("type") or "",
            channel=data.get("channel") or "",
            q=data.get("q") or "",
            since=datetime.fromisoformat(since) if since else None,
            until=datetime.fromisoformat(until) if until else None,
        )

    @property
    def joins_notifications(self) -> bool:
        """Whether the conditions read the notification (the type filter); otherwise the DLQ index suffices."""
        return bool(self.type)

    @property
    def empty(self) -> bool:
        """Whether nothing narrows the DLQ (the bulk actions then say "all")."""
        return not (self.error_kind or self.provider or self.type or self.channel or self.q or self.since or self.until)


def _page(where: Where, cursor: int | None, limit: int) -> Page:
    where.before_id("d.id", cursor)
    sql = f"""SELECT {ROW_COLUMNS}
FROM notification_deliveries d
JOIN notifications n ON n.id = d.notification_id
JOIN users u ON u.id = n.user_id
{where.sql}
ORDER BY d.id DESC
LIMIT :limit"""
    return keyset_page(sql, where.params, limit, id_cursor)


def delivery_page(filters: LogFilters, cursor: int | None = None, limit: int = PAGE_SIZE) -> Page:
    """Return one page of the delivery log, newest first."""
    return _page(filters.where(), cursor, limit)


def dlq_page(filters: DlqFilters, cursor: int | None = None, limit: int = PAGE_SIZE) -> Page:
    """Return one page of the dead-letter queue, newest first."""
    return _page(filters.where(), cursor, limit)


def dlq_count(filters: DlqFilters) -> int:
    """How many failed rows match the filters."""
    where = filters.where()
    join = "JOIN notifications n ON n.id = d.notification_id" if filters.joins_notifications else ""
    sql = sa.text(f"SELECT count(*) FROM notification_deliveries d {join} {where.sql}")
    return db.session.execute(sql, where.params).scalar_one()


DLQ_FACETS_SQL = sa.text(
    """
SELECT coalesce(error_kind, '') AS error_kind, coalesce(provider, '') AS provider, count(*) AS total
FROM notification_deliveries
WHERE status = 'failed'
GROUP BY 1, 2
ORDER BY 3 DESC
LIMIT 500
"""
)


def dlq_facets() -> dict[str, list[tuple[str, int]]]:
    """The error kinds and providers present in the DLQ, with counts (for the filter choices)."""
    kinds: dict[str, int] = {}
    providers: dict[str, int] = {}
    for row in db.session.execute(DLQ_FACETS_SQL):
        if row.error_kind:
            kinds[row.error_kind] = kinds.get(row.error_kind, 0) + row.total
        if row.provider:
            providers[row.provider] = providers.get(row.provider, 0) + row.total
    return {"error_kind": sorted(kinds.items()), "provider": sorted(providers.items())}


DELIVERY_SQL = sa.text(
    f"""
SELECT {ROW_COLUMNS}, d.provider_message_id, d.provider_status_at, d.locked_until,
       d.rendered_subject, d.rendered_body,
       n.body, n.link_path, n.data, n.in_app, n.read_at, n.dedupe_key, n.created_at AS notification_created_at,
       n.window_ends_at, n.workflow_version_id, n.traceparent,
       u.display_name, u.locale, u.timezone, t.label AS type_label, t.priority, c.name AS campaign_name
FROM notification_deliveries d
JOIN notifications n ON n.id = d.notification_id
JOIN users u ON u.id = n.user_id
JOIN notification_types t ON t.type = n.type
LEFT JOIN campaigns c ON c.id = n.campaign_id
WHERE d.id = :id
"""
)

# A "first" chain: every channel of the delivery's notification in order, with what became of each.
CHAIN_SQL = sa.text(
    """
SELECT id, channel, status, route_rank, skip_reason, error_kind, last_error, attempts, sent_at
FROM notification_deliveries
WHERE notification_id = :notification_id AND user_id = :user_id AND route_rank IS NOT NULL
ORDER BY route_rank
"""
)


def chain(notification_id: int, user_id: int) -> list:
    """The channels of a notification's "first" chain, in order (empty when it has none)."""
    return db.session.execute(CHAIN_SQL, {"notification_id": notification_id, "user_id": user_id}).mappings().all()


# The timeline: the tries, and what the provider reported afterwards (app/hooks), in time order. An event's
# outcome is what happened (delivered, bounced …), its error the provider's reason, its duration NULL.
ATTEMPTS_SQL = sa.text(
    """
SELECT kind, id, provider, started_at, duration_ms, outcome, error FROM (
  SELECT 'attempt' AS kind, id, provider, started_at, duration_ms, outcome, error
  FROM delivery_attempts
  WHERE delivery_id = :id
  UNION ALL
  SELECT 'event', id, provider, occurred_at, NULL, event,
         NULLIF(concat_ws(' · ', detail->>'recipient', detail->>'type', detail->>'severity',
                          coalesce(detail->>'reason', detail->>'description', detail->>'details'), detail->>'url'), '')
  FROM provider_events
  WHERE delivery_id = :id
) t
ORDER BY started_at, kind, id
LIMIT 500
"""
)


def delivery(delivery_id: int):
    """Return one delivery with its notification, recipient and campaign, or None."""
    if not is_id(delivery_id):
        return None
    return db.session.execute(DELIVERY_SQL, {"id": delivery_id}).mappings().first()


# The notification's ledger rows as its workflow run reads them (app/workflows/trace.py): each names its step.
RUN_ROWS_SQL = sa.text(
    """
SELECT id, channel, status, skip_reason, error_kind, next_attempt_at, sent_at, updated_at, attempts, workflow_step_id
FROM notification_deliveries
WHERE notification_id = :id
"""
)


def workflow_run(d) -> dict | None:
    """The run of delivery d's notification ({version, steps}), or None for one from before workflows."""
    if d["workflow_version_id"] is None:
        return None
    rows = list(db.session.execute(RUN_ROWS_SQL, {"id": d["notification_id"]}).mappings())
    notification = {
        "workflow_version_id": d["workflow_version_id"],
        "created_at": d["notification_created_at"],
        "window_ends_at": d["window_ends_at"],
        "in_app": d["in_app"],
        "data": d["data"],
        "timezone": d["timezone"],
    }
    return notification_trace(notification, rows)


def attempts(delivery_id: int) -> list:
    """Return the delivery's tries and provider events in time order: kind, provider, outcome, error, duration."""
    return list(db.session.execute(ATTEMPTS_SQL, {"id": delivery_id}).mappings())


BULK_SQL = """
SELECT b.id, b.kind, b.filters, b.reason, b.status, b.total, b.done, b.created_at, b.finished_at,
       u.email AS created_by
FROM bulk_operations b LEFT JOIN users u ON u.id = b.created_by
{where}
ORDER BY b.id DESC
LIMIT :limit
"""


def bulk_operations(limit: int = 5) -> list:
    """The latest bulk DLQ operations, newest first."""
    return list(db.session.execute(sa.text(BULK_SQL.format(where="")), {"limit": limit}).mappings())


def bulk_operation(operation_id: int):
    """One bulk DLQ operation with its progress, or None."""
    if not is_id(operation_id):
        return None
    sql = sa.text(BULK_SQL.format(where="WHERE b.id = :id"))
    return db.session.execute(sql, {"id": operation_id, "limit": 1}).mappings().first()


UNFINISHED_BULK_SQL = sa.text(
    "SELECT id FROM bulk_operations WHERE status IN ('queued', 'running') ORDER BY id LIMIT 100"
)


def unfinished_bulk_operations() -> list[int]:
    """Ids of bulk operations not finished yet (the sweeper makes sure each has a job)."""
    return list(db.session.execute(UNFINISHED_BULK_SQL).scalars())


def log_channels() -> tuple[str, ...]:
    """The channels the delivery log and the DLQ filter by (the registry's, in order)."""
    return routable_names()
