"""Writes for the notify pipeline: notifications and their e-mail/push ledger rows, set-based.

One statement per call (app/notify/statement.py), whatever the number of recipients: the seed's
`INSERT … ON CONFLICT (user_id, dedupe_key) DO NOTHING RETURNING`, the seed's preference
resolution (`EFFECTIVE_SEND_SQL`) for every recipient at once, and an `INSERT … SELECT` of the
deliveries for the rows that were really inserted. Only when some recipients already had the
dedupe key does a second, indexed query fetch their existing rows. notify() flushes and registers
what must follow the commit (the new deliveries' jobs on the type's queue, the badge events): the
caller owns the transaction, and those effects run only if it commits (app/unitofwork.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

from app import driversql, telemetry, unitofwork
from app.extensions import db
from app.live.publish import badge_after_commit
from app.notify import aggregate, queries, statement
from app.notify.delivery_sql import (
    routable,
)
from app.queueing import delivery_queue, enqueue_deliveries_after_commit
from app.tenants import queries as tenant_queries
from app.webhooks import service as webhooks

PRIORITY_SQL = sa.text("SELECT priority FROM notification_types WHERE type = :type")

# With tracing on, the new rows keep the request's trace context (app/telemetry.py): their sends join its trace
# and the delivery log shows its id. A statement of its own, sent only then: the ingest statement stays within
# psycopg's parse cache (tests/notify/test_statement_size.py), and tracing off costs nothing.
TRACE_SQL = driversql.compiled(
    sa.text(
        "UPDATE notifications SET traceparent = :traceparent "
        "WHERE id = ANY(CAST(:ids AS bigint[])) AND user_id = ANY(CAST(:user_ids AS bigint[]))"
    )
)


# Action buttons (issue 33, app/actions) ride in a statement of their own, sent only with buttons, for the same
# reason as TRACE_SQL: the ingest statement stays within psycopg's parse cache.
ACTIONS_SQL = driversql.compiled(
    sa.text(
        "UPDATE notifications SET actions = CAST(:actions AS jsonb) "
        "WHERE id = ANY(CAST(:ids AS bigint[])) AND user_id = ANY(CAST(:user_ids AS bigint[]))"
    )
)


class OutsideTenant(ValueError):
    """Some recipients are not members of the request's tenant; nothing was written."""

    def __init__(self, outsiders: list) -> None:
        self.outsiders = outsiders
        super().__init__(f"{len(outsiders)} recipient(s) outside the tenant")


def check_tenant(refs: Sequence, tenant_id: int | None, by: str) -> None:
    """Raise OutsideTenant naming the recipients who are not the tenant's members (none checked without a tenant).

    One set-based statement before the ingest's, which locks the members' rows until the commit (a removal then
    waits): the ingest statement itself is at psycopg's 4 KB parse-cache limit (tests/notify/test_statement_size.py).
    """
    if tenant_id is not None:
        outsiders = tenant_queries.outsiders(refs, tenant_id, by)
        if outsiders:
            raise OutsideTenant(outsiders)


class NotifyError(ValueError):
    """The type or some recipients are unknown; nothing was written."""

    def __init__(self, unknown_type: str | None, unknown_recipients: list) -> None:
        self.unknown_type = unknown_type
        self.unknown_recipients = unknown_recipients
        parts = []
        if unknown_type is not None:
            parts.append(f"unknown notification type {unknown_type!r}")
        if unknown_recipients:
            parts.append(f"{len(unknown_recipients)} unknown recipient(s)")
        super().__init__("; ".join(parts))


@dataclass(frozen=True)
class Recipient:
    """What happened for one recipient: a new row, or the one its dedupe key already names."""

    ref: Any
    user_id: int
    notification_id: int
    created: bool
    in_app: bool


@dataclass(frozen=True)
class NotifyResult:
    """Per-recipient outcome, the new pending delivery ids per channel, and the type's queue."""

    priority: str
    recipients: list[Recipient]
    pending: dict[str, list[int]]

    def badge_user_ids(self) -> list[int]:
        """Users whose inbox gained a visible row (the ones to send a badge event)."""
        return [r.user_id for r in self.recipients if r.created and r.in_app]


def unique(refs: Sequence) -> list:
    """Return refs without repeats, first occurrence kept."""
    return list(dict.fromkeys(refs))


def notify(
    refs: Sequence,
    *,
    type_: str,
    title: str,
    body: str,
    dedupe_key: str,
    link_path: str | None = None,
    data: dict | None = None,
    by: Literal["external_id", "user_id"] = "external_id",
    campaign_id: int | None = None,
    strict: bool = True,
    api_key_id: int | None = None,
    group_key: str | None = None,
    cancellation_key: str | None = None,
    actor: dict | None = None,
    channels: Sequence[str] | None = None,
    channel_mode: str | None = None,
    tenant_id: int | None = None,
    actions: list[dict] | None = None,
) -> NotifyResult:
    """Write one notification per recipient and its deliveries, in the caller's transaction.

    Idempotent per (recipient, dedupe_key): a repeat returns the existing row with created=False and
    creates no deliveries. strict=True writes nothing at all when any recipient is unknown.
    After the commit, the new deliveries are enqueued and the recipients' badges told (with a toast).
    A recipient who muted the group_key thread gets the row born read and hidden, and no e-mail/push.
    An event with a group_key of a type with an aggregation window joins the recipient's open row
    instead (app/notify/aggregate.py): the statement below then writes nothing and says so.
    channels (the delivery channels in order) and channel_mode (all | first) route this notification instead
    of its type's defaults; in-app is recorded as the type and the member's preference say, whatever the order.
    tenant_id (issue 32): every recipient must be the tenant's member (else OutsideTenant, nothing written); the rows
    carry it, and its default preferences apply between the type's and the member's.
    actions (issue 33): the new rows' buttons, as app/api/notification_schemas.py ActionIn.stored() gives them.
    Raises NotifyError for an unknown type or (strict) unknown recipients.
    """
    refs = unique(refs)
    check_tenant(refs, tenant_id, by)
    if not refs:
        priority = db.session.execute(PRIORITY_SQL, {"type": type_}).scalar()
        if priority is None:
            raise NotifyError(type_, [])
        return NotifyResult(priority=priority, recipients=[], pending={name: [] for name in routable()})
    params = {
        "refs": refs,
        "strict": strict,
        "type": type_,
        "title": title,
        "body": body,
        "link_path": link_path,
        "dedupe_key": dedupe_key,
        "data": json.dumps(data or {}, separators=(",", ":")),
        "campaign_id": campaign_id,
        "api_key_id": api_key_id,
        "group_key": group_key,
        "cancellation_key": cancellation_key,
        "route": list(channels) if channels is not None else None,
        "mode": channel_mode,
        "tenant": tenant_id,
    }
    # Straight through psycopg in the unit of work's transaction (app/driversql.py): SQLAlchemy's execute, even
    # Core's, costs more Python than this one statement's round trip. flush() stands in for the autoflush
    # that execute would do (nothing to do, and cheap, here).
    unitofwork.flush()
    rows = driversql.fetchall(statement.notify_driver_sql(by), params)
    window = rows[0].aggregation_window if rows and rows[0].kind == "recipient" else None
    if window is not None and group_key is not None:
        return _aggregated(statement.aggregate_sql(by), params, window, actor, strict)
    result = _result(rows, type_, dedupe_key, strict)
    created = [r for r in result.recipients if r.created]
    traceparent = telemetry.traceparent()  # None with tracing off
    if created and traceparent:
        ids, user_ids = [r.notification_id for r in created], [r.user_id for r in created]
        driversql.fetchone(TRACE_SQL, {"traceparent": traceparent, "ids": ids, "user_ids": user_ids})
    if created and actions:  # before the commit, so every delivery job reads them
        ids, user_ids = [r.notification_id for r in created], [r.user_id for r in created]
        driversql.fetchone(ACTIONS_SQL, {"actions": json.dumps(actions), "ids": ids, "user_ids": user_ids})
    if created:  # the product hears of them in this transaction's outbox (app/webhooks)
        webhooks.emit_many("notification.created", [
            {"notification_id": r.notification_id, "user_id": r.user_id, "type": type_, "dedupe_key": dedupe_key}
            for r in created])  # fmt: skip
    for channel, ids in result.pending.items():
        # One call commits a few rows: coalesced, so a worker drains many commits' rows per job.
        if ids:
            enqueue_deliveries_after_commit(
                delivery_queue(result.priority, campaign_id is not None), channel, ids, True
            )
    shown = [(r.user_id, r.notification_id) for r in result.recipients if r.created and r.in_app]
    badge_after_commit(result.badge_user_ids(), toast_title=title, notifications=shown, toast_tenant=tenant_id)
    return result


def _result(rows: list, type_: str, dedupe_key: str, strict: bool) -> NotifyResult:
    wanted = [row for row in rows if row.kind == "recipient"]
    priority = wanted[0].priority
    unknown = [row.ref for row in wanted if row.user_id is None]
    if priority is None or (unknown and strict):
        raise NotifyError(type_ if priority is None else None, unknown)
    # Rows ON CONFLICT skipped (a repeat, or a concurrent request's insert this statement's snapshot
    # cannot see) are looked up afterwards, by index; the usual all-new case needs no lookup.
    repeats = [row.user_id for row in wanted if row.user_id is not None and row.id is None]
    existing = queries.existing_notifications(repeats, dedupe_key) if repeats else {}
    recipients = []
    for row in wanted:
        found = (row.id, row.in_app) if row.id is not None else existing.get(row.user_id)
        if found is not None:  # None: unknown (not strict), or erased while this ran
            recipients.append(Recipient(row.ref, row.user_id, found[0], row.id is not None, found[1]))
    pending: dict[str, list[int]] = {name: [] for name in routable()}
    for row in rows:
        if row.kind == "delivery":
            pending[row.channel].append(row.id)
    return NotifyResult(priority=priority, recipients=recipients, pending=pending)


def _aggregated(statement, params: dict, window: int, actor: dict | None, strict: bool) -> NotifyResult:
    """The grouped event of an aggregating type: join or open each recipient's window (no job now)."""
    rows = aggregate.join_windows(statement, params, window=window, actor=actor)
    unknown = [row.ref for row in rows if row.user_id is None]
    if unknown and strict:
        raise NotifyError(None, unknown)
    repeats = [row.user_id for row in rows if row.user_id is not None and row.id is None]
    existing = aggregate.existing_events(repeats, params["dedupe_key"])
    recipients = []
    for row in rows:
        found = (row.id, row.in_app) if row.id is not None else existing.get(row.user_id)
        if found is not None:
            recipients.append(Recipient(row.ref, row.user_id, found[0], row.id is not None, found[1]))
    badge_after_commit([row.user_id for row in rows if row.id is not None and row.visible], toast_title=params["title"],
                       toast_tenant=params["tenant"])  # fmt: skip
    return NotifyResult(priority=rows[0].priority, recipients=recipients, pending={name: [] for name in routable()})
