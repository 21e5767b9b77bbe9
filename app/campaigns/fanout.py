"""The campaign fanout, set-based: one INSERT … SELECT per keyset batch of about 10,000 user ids.

Each batch is one statement over a `recipients` CTE that reads the next user ids after the campaign's
cursor: the ingest's rules (app/notify/service.py) in a shape fitted to a batch of users who all get
the same content. Its `prefs` CTE reads preferences by the batch's user-id range (an index range
instead of hashing every preference row of the type again for each batch), one row per user; `sends`
resolves each recipient's channels (the registry's) side by side with the seed's rule (effective_send_sql), and
carries the e-mail address the audience query read. Notifications carry
`dedupe_key = 'campaign:<id>'` with ON CONFLICT DO NOTHING, and their e-mail/push deliveries (skip
reasons and escalation as the ingest writes them) are written by the same statement (data-modifying
CTE). tests/campaigns/test_fanout.py checks the rows are exactly the ones the ingest writes. The
cursor and done count move in the same transaction, under a lock on the campaign row, so a batch
either happened completely (and is never redone) or not at all; a re-run from scratch would still
create nothing twice, because of the dedupe key.

run() is the job: it commits each batch on its own. A batch registers, to follow its commit, its
deliveries' jobs on the campaign queue (`low`, so interactive notifications never wait behind a
campaign) and badge events for the recipients with a live socket; the dispatcher sends them while
the next batch's INSERT … SELECT runs. The sweeper calls start_due(): scheduled campaigns start when
due, and a running campaign whose job was lost (Redis flushed, worker killed) or stepped aside for
interactive work (app/backpressure.py) gets a new one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache

import sqlalchemy as sa
from flask import current_app

from app import backpressure
from app.campaigns import queries
from app.extensions import db
from app.limits import ERROR_TEXT_MAX
from app.live.publish import badge_after_commit
from app.models import Campaign
from app.notify.delivery_sql import (
    CHAIN_RANK_SQL,
    CHAIN_REASON_SQL,
    CHAIN_STATUS_SQL,
    routable,
    skip_reason_lateral,
    step_due_sql,
    step_join_sql,
)
from app.preferences.rules import effective_send_sql, type_default_sql
from app.queueing import CAMPAIGN_QUEUE, enqueue_deliveries_after_commit, fanout_job
from app.unitofwork import after_commit, commit

# `(SELECT … LIMIT)` on the primary key, with the cursor as a plain parameter: the index scan starts
# at the cursor and stops after :size rows, however many users there are.
LOCALE_MATCH_SQL = (
    "(lower(replace(coalesce(u.locale, :default_locale), '_', '-')) = :locale"
    " OR lower(replace(coalesce(u.locale, :default_locale), '_', '-')) LIKE :locale || '-%')"
)

AUDIENCE_SQL = {
    "all": "SELECT u.id AS user_id, u.email FROM users u WHERE u.id > :after ORDER BY u.id LIMIT :size",
    "locale": f"SELECT u.id AS user_id, u.email FROM users u WHERE u.id > :after AND {LOCALE_MATCH_SQL} "
    "ORDER BY u.id LIMIT :size",
    # u.id > :after too: the planner does not carry the inequality across the join (app/topics/fanout.py).
    "list": "SELECT r.user_id, u.email FROM campaign_recipients r JOIN users u ON u.id = r.user_id "
    "WHERE r.campaign_id = :campaign_id AND r.user_id > :after AND u.id > :after ORDER BY r.user_id LIMIT :size",
}

COUNT_SQL = {
    "all": sa.text("SELECT count(*) FROM users"),
    "locale": sa.text(f"SELECT count(*) FROM users u WHERE {LOCALE_MATCH_SQL}"),
    "list": sa.text("SELECT count(*) FROM campaign_recipients WHERE campaign_id = :campaign_id"),
}


def _prefs_cte(channels: list[str]) -> str:
    """The batch's preference rows, read by its user-id range (see the module docstring), one row per user."""
    columns = ",\n".join(
        f"         bool_or(p.enabled) FILTER (WHERE p.channel = '{name}') AS \"{name}\""
        for name in ["in_app", *channels]
    )
    return f"""
prefs AS (
  SELECT p.user_id,
{columns}
  FROM notification_preferences p
  WHERE p.type = :type AND p.user_id > :after AND p.user_id <= (SELECT max(user_id) FROM recipients)
  GROUP BY p.user_id
),"""


@dataclass(frozen=True)
class Shape:
    """What a fanout's notifications carry beyond its content, as SQL: a campaign's, or a topic's (app/topics).

    muted: whether recipient r muted the thread; order: the channel order before the type's own; chain: the
    mode; columns/values: further notification columns. A campaign has no group_key, route or mode of its own,
    so nothing is muted (the ingest's `muted` is false for every cell) and the type decides. With tenant_defaults
    a member's stored choice is followed by the tenant's default (`d`, one row: an aggregate without GROUP BY),
    then the type's, as in the ingest (app/preferences/rules.py).
    """

    muted: str = "false"
    order: str = "t.channels"
    chain: str = "t.channel_mode"
    columns: str = ""
    values: str = ""
    tenant_defaults: bool = False  # the :tenant's defaults (issue 32) between the member's choice and the type's


CAMPAIGN = Shape()


def _fanout_ctes(channels: list[str], shape: Shape = CAMPAIGN) -> str:
    """One row per recipient with its channels resolved side by side, then the rows the ingest would write.

    (The ingest's `cells` has one row per recipient and channel, each carrying the content: more rows to
    materialise and scan.) The content is the INSERT's parameters, and the type's escalation and channel
    order are read once per recipient. tests/campaigns/test_fanout.py and tests/topics/test_fanout.py check
    the rows are exactly the ingest's.
    """
    every = "ARRAY[" + ", ".join(f"'{name}'" for name in channels) + "]"  # a type without an order of its own
    stored = (lambda name: f'coalesce(p."{name}", d."{name}")') if shape.tenant_defaults else (lambda n: f'p."{n}"')
    sends = ",\n".join(
        f"""         {effective_send_sql(type_default_sql(name), stored(name))} AS "{name}_on",
         array_position(coalesce({shape.order}, {every}), '{name}') - 1 AS "{name}_rank\""""
        for name in channels
    )
    cells = "\n    UNION ALL\n".join(
        f"""    SELECT '{name}' AS channel, r.email, r.muted, r.chain, r."{name}_rank" AS rank
    WHERE r."{name}_rank" IS NOT NULL AND (r."{name}_on" OR r.chain)"""
        for name in channels
    )
    return f"""
sends AS (
  SELECT r.user_id, r.email,
         {effective_send_sql(type_default_sql("in_app"), stored("in_app"))} AND t.in_app_step AS in_app,
{sends},
         {shape.chain} = 'first' AS chain, t.workflow_version_id AS version_id, {shape.muted} AS muted
  FROM recipients r
  JOIN notification_types t ON t.type = :type
  LEFT JOIN prefs p ON p.user_id = r.user_id{_tenant_defaults_join(channels) if shape.tenant_defaults else ""}
),
inserted AS (
  -- With in-app off the row is still written (it anchors the deliveries) but born read and hidden.
  INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, data, campaign_id, in_app, read_at,
                             workflow_version_id{shape.columns})
  SELECT s.user_id, :type, :title, :body, :link_path, :dedupe_key, CAST(:data AS jsonb),
         CAST(:campaign_id AS bigint), s.in_app AND NOT s.muted, CASE WHEN s.in_app AND NOT s.muted THEN NULL
         ELSE now() END, s.version_id{shape.values}
  FROM sends s
  ON CONFLICT (user_id, dedupe_key) DO NOTHING
  RETURNING id, user_id, in_app
),
deliveries AS (
  INSERT INTO notification_deliveries (notification_id, user_id, channel, status, skip_reason, next_attempt_at,
                                       escalation, route_rank, workflow_step_id)
  SELECT i.id, i.user_id, c.channel, {CHAIN_STATUS_SQL}, {CHAIN_REASON_SQL},
         {step_due_sql("now()", "CAST(:data AS jsonb)", "i.user_id")}, ws.unless, {CHAIN_RANK_SQL}, ws.id
  FROM inserted i
  JOIN sends r ON r.user_id = i.user_id
  CROSS JOIN LATERAL (
{cells}
  ) c
  {step_join_sql("r.version_id", "c.channel")}
{skip_reason_lateral()}  RETURNING id, channel, status, escalation, next_attempt_at
)"""


def _tenant_defaults_join(channels: list[str]) -> str:
    """The :tenant's defaults for the type, one row of one column per channel (NULLs without a tenant or a default)."""
    columns = ", ".join(
        f"bool_or(enabled) FILTER (WHERE channel = '{name}') AS \"{name}\"" for name in ["in_app", *channels]
    )
    return f"""
  LEFT JOIN (SELECT {columns} FROM tenant_preferences
             WHERE tenant_id = CAST(:tenant AS bigint) AND type = :type) d ON true"""


@cache
def batch_sql(kind: str) -> sa.TextClause:
    """The batch statement for an audience kind (built once: its channels come from the registry)."""
    return statement(AUDIENCE_SQL[kind])


def statement(recipients_sql: str, shape: Shape = CAMPAIGN) -> sa.TextClause:
    """The batch statement over `recipients_sql` (user_id, email: the batch's users after :after, by user id)."""
    channels = routable()
    return sa.text(
        f"""
WITH recipients AS (
  {recipients_sql}
),{_prefs_cte(channels)}
{_fanout_ctes(channels, shape)}
SELECT (SELECT count(*) FROM recipients) AS users,
       (SELECT max(user_id) FROM recipients) AS last_user_id,
       (SELECT count(*) FROM inserted) AS created,
       (SELECT coalesce(json_object_agg(channel, ids), '{{}}') FROM (
          SELECT channel, array_agg(id ORDER BY id) AS ids FROM deliveries
          WHERE status = 'pending' AND next_attempt_at <= now() GROUP BY channel) g) AS pending,
       (SELECT coalesce(array_agg(user_id), '{{}}') FROM inserted WHERE in_app) AS badge_user_ids
"""
    )


# The statement's tuple stores (recipients, sends, the RETURNING rows) hold about 1 kB per recipient:
# at PostgreSQL's default work_mem (4 MB) a 10,000-user batch spilled them to a temp file and read them
# back (EXPLAIN ANALYZE: "temp written"). The batch's own transaction gets room for them (SET LOCAL:
# nothing else changes), within these bounds. JIT is off for it: the planner guesses the join of the
# RETURNING rows to `sends` at 50 times its size, and the cost crosses jit_above_cost, so every batch
# compiled its expressions (about a second, more than the batch itself) to run them 10,000 times.
WORK_MEM_SQL = sa.text("SELECT set_config('work_mem', :kb || 'kB', true), set_config('jit', 'off', true)")
WORK_MEM_KB_PER_USER = 1
WORK_MEM_KB = (4 * 1024, 64 * 1024)


@dataclass(frozen=True)
class Batch:
    """What one batch wrote: the new pending deliveries, the inboxes that changed, whether it was the last."""

    users: int
    created: int
    pending: dict[str, list[int]] = field(default_factory=dict)
    badge_user_ids: list[int] = field(default_factory=list)
    finished: bool = False
    title: str = ""


def dedupe_key(campaign_id: int) -> str:
    """The key every notification of the campaign carries (one per user, whatever the re-runs)."""
    return f"campaign:{campaign_id}"


def _default_locale() -> str:
    """Users who chose no language count as DEFAULT_LOCALE's in a locale audience."""
    return current_app.config["DEFAULT_LOCALE"].lower()


def audience_size(kind: str, locale: str | None = None, campaign_id: int | None = None) -> int:
    """How many users an audience names right now."""
    return db.session.execute(
        COUNT_SQL[kind], {"locale": locale, "campaign_id": campaign_id, "default_locale": _default_locale()}
    ).scalar_one()


def _locked(campaign_id: int) -> Campaign | None:
    return db.session.get(Campaign, campaign_id, with_for_update=True, populate_existing=True)


def start(campaign_id: int) -> Campaign | None:
    """Move a due scheduled campaign to running (counting its audience); None if it must not run.

    A campaign already running is returned as is, so a second job (or a restart) resumes from its
    cursor. Drafts, finished, cancelled and failed campaigns, and ones not due yet, are left alone.
    """
    campaign = _locked(campaign_id)
    if campaign is None:
        return None
    if campaign.status == "scheduled":
        now = db.session.execute(sa.select(sa.func.now())).scalar_one()
        if campaign.scheduled_at is not None and campaign.scheduled_at > now:
            return None
        campaign.status = "running"
        campaign.started_at = campaign.started_at or now
        campaign.total = max(
            audience_size(campaign.audience_kind, campaign.audience_locale, campaign.id), campaign.done
        )
        db.session.flush()
    return campaign if campaign.status == "running" else None


def run_batch(campaign_id: int, size: int) -> Batch | None:
    """Fan out the next batch of users after the cursor; None when the campaign is no longer running.

    The campaign row stays locked until the caller commits, so a cancel waits for this batch and the
    next call sees it: cancelling stops the fanout after the batch in progress.
    """
    campaign = _locked(campaign_id)
    if campaign is None or campaign.status != "running":
        return None
    low, high = WORK_MEM_KB
    db.session.execute(WORK_MEM_SQL, {"kb": str(min(max(size * WORK_MEM_KB_PER_USER, low), high))})
    row = db.session.execute(
        batch_sql(campaign.audience_kind),
        {
            "after": campaign.cursor_user_id,
            "size": size,
            "locale": campaign.audience_locale,
            "default_locale": _default_locale(),
            "campaign_id": campaign.id,
            "type": campaign.type,
            "title": campaign.title,
            "body": campaign.body,
            "link_path": campaign.link_path,
            "dedupe_key": dedupe_key(campaign.id),
            "data": json.dumps(campaign.data or {}, separators=(",", ":")),
        },
    ).one()
    finished = row.users < size
    campaign.done += row.users
    if row.last_user_id is not None:
        campaign.cursor_user_id = row.last_user_id
    if finished:
        # Users who signed up during the fanout are included (their ids come after the cursor),
        # so the final count is the truth the bar should end on.
        campaign.status, campaign.total = "done", campaign.done
        campaign.finished_at = db.session.execute(sa.select(sa.func.now())).scalar_one()
    db.session.flush()
    pending = {name: list(row.pending.get(name, ())) for name in routable()}
    for channel, ids in pending.items():
        if ids:
            enqueue_deliveries_after_commit(CAMPAIGN_QUEUE, channel, ids)
    badge_after_commit(row.badge_user_ids, toast_title=campaign.title)
    return Batch(
        users=row.users,
        created=row.created,
        pending=pending,
        badge_user_ids=list(row.badge_user_ids),
        finished=finished,
        title=campaign.title,
    )


def mark_failed(campaign_id: int, error: str) -> None:
    """Record that the fanout stopped on an error (an operator can resume it from the cursor)."""
    campaign = _locked(campaign_id)
    if campaign is not None and campaign.status == "running":
        campaign.status, campaign.error = "failed", error[:ERROR_TEXT_MAX]
        db.session.flush()


def run(campaign_id: int, size: int) -> dict:
    """Fan the campaign out batch by batch until it is done or cancelled; return what was written.

    Idempotent and resumable: a second run, or a run after a crash, continues from the stored cursor,
    and the dedupe key stops anything being written twice. An error marks the campaign failed (an
    operator can resume it) and is raised again for RQ to record.
    """
    totals = {"batches": 0, "users": 0, "created": 0, **{name: 0 for name in routable()}, "badges": 0}
    handoffs = []
    try:
        started = start(campaign_id)
        commit()
        if started is None:
            return totals
        while (batch := run_batch(campaign_id, size)) is not None:
            handoffs.append(commit())
            totals["batches"] += 1
            totals["users"] += batch.users
            totals["created"] += batch.created
            for channel, ids in batch.pending.items():
                totals[channel] += len(ids)
            if batch.finished:
                break
            if backpressure.low_work_held():  # interactive work waits: the sweeper gives the campaign a new job
                break
    except Exception as exc:
        db.session.rollback()
        mark_failed(campaign_id, f"{type(exc).__name__}: {exc}")
        commit()
        raise
    totals["badges"] = sum(handoff.wait().get("badges", 0) for handoff in handoffs)
    return totals


def start_due() -> int:
    """Make sure every due scheduled and every running campaign has a live fanout job; return how many do."""
    for campaign_id in queries.campaigns_to_run():
        after_commit(fanout_job(campaign_id))
    return commit().wait().get("jobs", 0)
