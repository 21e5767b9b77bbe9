"""Writes for the notify pipeline: notifications and their e-mail/push ledger rows, set-based.

One statement per call, whatever the number of recipients: the seed's
`INSERT … ON CONFLICT (user_id, dedupe_key) DO NOTHING RETURNING`, the seed's preference
resolution (`EFFECTIVE_SEND_SQL`) for every recipient at once, and an `INSERT … SELECT` of the
deliveries for the rows that were really inserted. Only when some recipients already had the
dedupe key does a second, indexed query fetch their existing rows. notify() flushes and registers
what must follow the commit (the new deliveries' jobs on the type's queue, the badge events): the
caller owns the transaction, and those effects run only if it commits (app/unitofwork.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import sqlalchemy as sa

from app import driversql, telemetry
from app.extensions import db
from app.live.publish import badge_after_commit
from app.notify import aggregate, queries
from app.notify.aggregate import THREAD_LOCK_SQL
from app.notify.delivery_sql import (
    CHAIN_RANK_SQL,
    CHAIN_REASON_SQL,
    CHAIN_SQL,
    CHAIN_STATUS_SQL,
    in_app_send_sql,
    muted_sql,
    routable,
    route_sql,
    skip_reason_lateral,
    step_due_sql,
    step_join_sql,
)
from app.preferences.rules import effective_send_sql, member_then_tenant_sql, tenant_prefs_sql
from app.queueing import delivery_queue, enqueue_deliveries_after_commit
from app.tenants import queries as tenant_queries
from app.webhooks import service as webhooks

# The content of each row, as SQL: the request's parameters (one content for every recipient), or the
# columns of `recipients` (scheduled rows released together, each with its own content: app/notify/schedule.py).
PARAM_CONTENT = {
    "type": ":type",
    "title": ":title",
    "body": ":body",
    "link_path": ":link_path",
    "dedupe_key": ":dedupe_key",
    "data": "CAST(:data AS jsonb)",
    "campaign_id": "CAST(:campaign_id AS bigint)",
    "group_key": "CAST(:group_key AS text)",
    "cancellation_key": "CAST(:cancellation_key AS text)",
    "route": "CAST(:route AS text[])",  # the request's channel order, NULL: the type's (delivery_sql.ROUTE_SQL)
    "mode": "CAST(:mode AS text)",
    "tenant": "CAST(:tenant AS bigint)",  # the request's tenant's id (issue 32), NULL without one
}
ROW_CONTENT = {name: f"r.{name}" for name in PARAM_CONTENT}


ROW_API_KEY = "r.api_key_id"


# Needs CTEs `recipients(user_id, email)` and `prefs(user_id, channel, enabled)` (the recipients'
# preference rows for :type; with prefs_by_type, `prefs(user_id, type, channel, enabled)`) before it.
# Writes the rows and exposes them as `inserted` (new notifications) and `deliveries` (their ledger rows).
# One cell per recipient and channel of the route (delivery_sql.route_sql: in-app, then the delivery
# channels in order). The campaign fanout writes the
# same rows with its own statement (app/campaigns/fanout.py; a test compares them). api_key_id is the SQL
# for the creating API key's id. A row whose (user, group_key) thread the user muted, of a type that is
# not mandatory, is born read and hidden (in_app false) and its deliveries are recorded as skipped with
# reason 'muted'. In mode "all" a delivery row is written for each channel the recipient has on; in mode
# "first" for each channel of the route, the first pending and the rest standby (delivery_sql.CHAIN_*).
def _notify_ctes(
    api_key_id: str,
    content: dict[str, str] = PARAM_CONTENT,
    prefs_by_type: bool = False,
    types_also: str = "",
    tenant_ref: str = ":tenant",
) -> str:
    f = content
    by_type = " AND p.type = t.type" if prefs_by_type else ""
    return f"""
cells AS (
  SELECT r.user_id, r.email, c.channel, c.ord - 2 AS rank, {CHAIN_SQL.format(mode=f["mode"])} AS chain,
         {in_app_send_sql(effective_send_sql(enabled=member_then_tenant_sql()))} AS send, t.workflow_version_id AS v,
         {f["type"]} AS type, {f["title"]} AS title, {f["body"]} AS body, {f["link_path"]} AS link_path,
         {f["dedupe_key"]} AS dedupe_key, {f["data"]} AS data, {f["campaign_id"]} AS campaign_id,
         {f["group_key"]} AS group_key, {f["cancellation_key"]} AS cancellation_key, {api_key_id} AS api_key_id,
         {muted_sql(f["group_key"])} AS muted, {f["tenant"]} AS tenant
  FROM recipients r
  JOIN notification_types t ON t.type = {f["type"]}{types_also}
  CROSS JOIN unnest({route_sql(f["route"])}) WITH ORDINALITY c(channel, ord)
  LEFT JOIN prefs p ON p.user_id = r.user_id AND p.channel = c.channel{by_type}
  {tenant_prefs_sql(tenant_ref)}
),
inserted AS (
  -- With in-app off the row is still written (it anchors the deliveries) but is born read,
  -- so it never enters the unread index, and in_app = false hides it from every list.
  INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, data, campaign_id,
                             api_key_id, in_app, read_at, group_key, cancellation_key, workflow_version_id, tenant_id)
  SELECT c.user_id, c.type, c.title, c.body, c.link_path, c.dedupe_key, c.data, c.campaign_id,
         c.api_key_id, c.send AND NOT c.muted, CASE WHEN c.send AND NOT c.muted THEN NULL ELSE now() END,
         c.group_key, c.cancellation_key, c.v, c.tenant
  FROM cells c
  WHERE c.channel = 'in_app'
  ON CONFLICT (user_id, dedupe_key) DO NOTHING
  RETURNING id, user_id, in_app, dedupe_key, type, title
),
deliveries AS (
  -- A channel that is on but has nowhere to go is recorded as skipped, so the ledger says why.
  -- A row carries out its workflow step (ws): due after the step's delays, `escalation` says what cancels it;
  -- the sweeper enqueues a row due later (TAKE_DUE_SQL), so nothing enqueues it now.
  INSERT INTO notification_deliveries (notification_id, user_id, channel, status, skip_reason, next_attempt_at,
                                       escalation, route_rank, workflow_step_id)
  SELECT i.id, i.user_id, c.channel, {CHAIN_STATUS_SQL}, {CHAIN_REASON_SQL},
         {step_due_sql("now()", "c.data", "i.user_id")}, ws.unless, {CHAIN_RANK_SQL}, ws.id
  FROM inserted i
  JOIN cells c ON c.user_id = i.user_id AND c.dedupe_key = i.dedupe_key AND c.channel <> 'in_app'
              AND (c.send OR c.chain)
  {step_join_sql("c.v", "c.channel")}
{skip_reason_lateral()}  RETURNING id, notification_id, channel, status, next_attempt_at
)"""


# A grouped event of an aggregating type writes nothing in the ingest statement: app/notify/aggregate.py takes it.
AGGREGATED_ELSEWHERE_SQL = " AND (t.aggregation_window IS NULL OR CAST(:group_key AS text) IS NULL)"


# How callers name recipients: the product's external ids (API) or user ids (campaigns).
WANTED_SQL = {
    "external_id": """SELECT e.ord, e.ref, u.id AS user_id, u.email
  FROM unnest(CAST(:refs AS text[])) WITH ORDINALITY e(ref, ord)
  LEFT JOIN users u ON u.external_id = e.ref""",
    "user_id": """SELECT e.ord, e.ref, u.id AS user_id, u.email
  FROM unnest(CAST(:refs AS bigint[])) WITH ORDINALITY e(ref, ord)
  LEFT JOIN users u ON u.id = e.ref""",
}


# The type's priority and aggregation window. For a grouped event of an aggregating type (which the
# statement leaves to app/notify/aggregate.py), `locks` takes each recipient's thread lock, in user-id
# order so two requests cannot deadlock; the aggregate statement that follows takes its snapshot after them.
AGGREGATING_TYPE_SQL = f"""SELECT priority, aggregation_window,
         CASE WHEN aggregation_window IS NOT NULL AND CAST(:group_key AS text) IS NOT NULL THEN (
           SELECT count({THREAD_LOCK_SQL}) FROM (SELECT user_id FROM wanted WHERE user_id IS NOT NULL ORDER BY 1) l
         ) END AS locks
  FROM notification_types WHERE type = :type"""


_SPACE_AFTER = re.compile(r"(?<=[,(]) | (?=[()])")
_SPACE_AROUND = re.compile(r" ?(=|<>|<=|>| -|\|\|) ?")


def _compact(sql: str) -> str:
    """sql without its comment lines, indentation and the spaces next to commas, brackets and operators.

    No literal here spans lines, starts one with --, or holds a comma, bracket or operator with a space beside it
    (tests/notify/test_statement_size.py checks the literals survive). psycopg parses a query's placeholders once
    and caches the result only for texts up to 4 KB (psycopg._queries.MAX_CACHED_STATEMENT_LENGTH); the commented
    statement is 5 KB and was parsed again on every ingest.
    """
    lines = (line.strip() for line in sql.splitlines())
    text = "\n".join(line for line in lines if line and not line.startswith("--"))
    return _SPACE_AROUND.sub(r"\1", _SPACE_AFTER.sub("", text))


# The statement's result columns, in order. Declared, so SQLAlchemy builds the result's metadata once for the
# compiled statement instead of reading the cursor's description on every ingest.
NOTIFY_COLUMNS = ("kind", "ord", "ref", "user_id", "id", "in_app", "channel", "priority", "aggregation_window")


def _notify_statement(by: str) -> sa.TextualSelect:
    return sa.text(
        _compact(f"""
WITH wanted AS (
  {WANTED_SQL[by]}
),
recipients AS (
  -- strict = all or nothing: one unknown recipient and no row is written for anyone
  SELECT user_id, email FROM wanted
  WHERE user_id IS NOT NULL
    AND NOT (:strict AND EXISTS (SELECT 1 FROM wanted WHERE user_id IS NULL))
),
prefs AS (
  SELECT p.user_id, p.channel, p.enabled FROM notification_preferences p
  WHERE p.type = :type AND p.user_id IN (SELECT user_id FROM recipients)
),
{_notify_ctes("CAST(:api_key_id AS bigint)", types_also=AGGREGATED_ELSEWHERE_SQL)}
-- One row per recipient, then one per new pending delivery: two lists, so nothing is joined to the
-- data-modifying CTEs' output (the planner guesses one row for them; a join could go quadratic).
SELECT 'recipient' AS kind, w.ord, w.ref, w.user_id, i.id, i.in_app, NULL AS channel, tp.priority,
       tp.aggregation_window
FROM wanted w
LEFT JOIN inserted i ON i.user_id = w.user_id
LEFT JOIN ({AGGREGATING_TYPE_SQL}) tp ON true
UNION ALL
SELECT 'delivery', NULL, NULL, NULL, d.id, NULL, d.channel, NULL, NULL
FROM deliveries d
WHERE d.status = 'pending' AND d.next_attempt_at <= now()
ORDER BY 1 DESC, 2, 5
""")
    ).columns(*(sa.column(name) for name in NOTIFY_COLUMNS))


@cache
def notify_sql(by: str) -> sa.TextualSelect:
    """The ingest statement for recipients named by `by` (built once: its channels come from the registry)."""
    return _notify_statement(by)


@cache
def _notify_driver_sql(by: str):
    return driversql.compiled(notify_sql(by))


@cache
def _aggregate_sql(by: str):
    return aggregate.upsert_statement(WANTED_SQL[by])


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
    actions (issue 33): the new rows' buttons, as app/api/schemas.py ActionIn.stored() gives them.
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
    # Straight through psycopg on the session's connection (app/driversql.py): SQLAlchemy's execute, even
    # Core's, costs more Python than this one statement's round trip. flush() stands in for the autoflush
    # that execute would do (nothing to do, and cheap, here).
    db.session.flush()
    rows = driversql.fetchall(_notify_driver_sql(by), params)
    window = rows[0].aggregation_window if rows and rows[0].kind == "recipient" else None
    if window is not None and group_key is not None:
        return _aggregated(_aggregate_sql(by), params, window, actor, strict)
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
