"""The ingest's one statement: notifications and their ledger rows for every recipient, set-based.

The seed's `INSERT … ON CONFLICT (user_id, dedupe_key) DO NOTHING RETURNING`, the seed's preference resolution
(`EFFECTIVE_SEND_SQL`) for every recipient at once, and an `INSERT … SELECT` of the deliveries for the rows that
were really inserted, built once per way of naming recipients (app/notify/service.py runs it; the CTEs serve
app/notify/schedule.py's release too). Compacted to stay within psycopg's parse cache.
"""

from __future__ import annotations

import re
from functools import cache

import sqlalchemy as sa

from app import driversql
from app.notify import aggregate
from app.notify.aggregate import THREAD_LOCK_SQL
from app.notify.delivery_sql import (
    CHAIN_RANK_SQL,
    CHAIN_REASON_SQL,
    CHAIN_SQL,
    CHAIN_STATUS_SQL,
    in_app_send_sql,
    muted_sql,
    route_sql,
    skip_reason_lateral,
    step_due_sql,
    step_join_sql,
)
from app.preferences.rules import effective_send_sql, member_then_tenant_sql, tenant_prefs_sql

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
def notify_ctes(
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
{notify_ctes("CAST(:api_key_id AS bigint)", types_also=AGGREGATED_ELSEWHERE_SQL)}
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
def notify_driver_sql(by: str):
    """notify_sql(by) as driversql sends it (compiled once)."""
    return driversql.compiled(notify_sql(by))


@cache
def aggregate_sql(by: str):
    """The statement app/notify/aggregate.py runs for a grouped event of an aggregating type."""
    return aggregate.upsert_statement(WANTED_SQL[by])
