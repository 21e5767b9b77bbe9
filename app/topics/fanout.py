"""A topic notification's fanout: the campaign fanout's statement (app/campaigns/fanout.py) over a topic's followers.

Each batch is one INSERT … SELECT over the next followers after the fanout's cursor (topic_subscriptions by
(topic_id, user_id), the excluded ids and the actor left out), with the shape of the ingest's request fields
(campaigns.fanout.Shape): the group_key's mutes, the request's channel order and mode, its API key, cancellation
key, the topic's id and the request's tenant on each row (with a tenant, only the followers who are its members,
with the tenant's defaults between theirs and the type's). Rows carry the request's dedupe key with ON CONFLICT
DO NOTHING, and the cursor, done and created counts move in the same transaction under a lock on the fanout row:
a batch happened completely or not at all, and a lost job (the sweeper's start_due gives it a new one) resumes
from the cursor writing nothing twice. Deliveries go on their type's priority queue, as the ingest's;
tests/topics/test_fanout.py checks the rows are exactly the ones the ingest writes for the same followers.
Aggregation windows do not apply to a topic
fanout (each follower gets their own row, as from a campaign).
"""

from __future__ import annotations

import json
from functools import cache

import sqlalchemy as sa

from app.campaigns.fanout import WORK_MEM_KB, WORK_MEM_KB_PER_USER, WORK_MEM_SQL, Batch, Shape, statement
from app.extensions import db
from app.limits import ERROR_TEXT_MAX
from app.live.publish import badge_after_commit
from app.models import TopicFanout
from app.notify.delivery_sql import muted_sql, routable
from app.queueing import delivery_queue, enqueue_deliveries_after_commit, topic_fanout_job
from app.topics import queries
from app.unitofwork import after_commit, commit

# `u.id > :after` as well as `s.user_id > :after`: the planner does not carry an inequality across the join, and
# without it the merge join read users' primary key from the first id on every batch (quadratic in the topic size).
RECIPIENTS_SQL = f"""SELECT s.user_id, u.email FROM topic_subscriptions s JOIN users u ON u.id = s.user_id
  WHERE s.topic_id = :topic_id AND s.user_id > :after AND u.id > :after
    AND s.user_id <> ALL(CAST(:excluded AS bigint[])) AND {queries.MEMBER_OF_TENANT_SQL}
  ORDER BY s.user_id LIMIT :size"""

TOPIC = Shape(
    muted=muted_sql("CAST(:group_key AS text)"),
    order="CAST(:route AS text[]), t.channels",
    chain="coalesce(CAST(:mode AS text), t.channel_mode)",
    columns=", api_key_id, group_key, cancellation_key, topic_id, tenant_id",
    values=", CAST(:api_key_id AS bigint), CAST(:group_key AS text), CAST(:cancellation_key AS text), "
    "CAST(:topic_id AS bigint), CAST(:tenant AS bigint)",
    tenant_defaults=True,
)

PRIORITY_SQL = sa.text("SELECT priority FROM notification_types WHERE type = :type")


@cache
def batch_sql() -> sa.TextClause:
    """The batch statement (built once: its channels come from the registry)."""
    return statement(RECIPIENTS_SQL, TOPIC)


def _locked(fanout_id: int) -> TopicFanout | None:
    return db.session.get(TopicFanout, fanout_id, with_for_update=True, populate_existing=True)


def run_batch(fanout_id: int, size: int) -> Batch | None:
    """Write the next batch of followers after the cursor; None when the fanout is no longer running."""
    fanout = _locked(fanout_id)
    if fanout is None or fanout.status != "running":
        return None
    low, high = WORK_MEM_KB
    db.session.execute(WORK_MEM_SQL, {"kb": str(min(max(size * WORK_MEM_KB_PER_USER, low), high))})
    row = db.session.execute(
        batch_sql(),
        {
            "after": fanout.cursor_user_id,
            "size": size,
            "topic_id": fanout.topic_id,
            "excluded": fanout.excluded_user_ids,
            "campaign_id": None,
            "type": fanout.type,
            "title": fanout.title,
            "body": fanout.body,
            "link_path": fanout.link_path,
            "dedupe_key": fanout.dedupe_key,
            "data": json.dumps(fanout.data or {}, separators=(",", ":")),
            "group_key": fanout.group_key,
            "route": fanout.route,
            "mode": fanout.channel_mode,
            "api_key_id": fanout.api_key_id,
            "cancellation_key": fanout.cancellation_key,
            "tenant": fanout.tenant_id,
        },
    ).one()
    finished = row.users < size
    fanout.done += row.users
    fanout.created += row.created
    if row.last_user_id is not None:
        fanout.cursor_user_id = row.last_user_id
    if finished:
        # Followers added during the fanout are included (their ids come after the cursor): end on the truth.
        fanout.status, fanout.total = "done", fanout.done
        fanout.finished_at = db.session.execute(sa.select(sa.func.now())).scalar_one()
    db.session.flush()
    priority = db.session.execute(PRIORITY_SQL, {"type": fanout.type}).scalar_one()
    pending = {name: list(row.pending.get(name, ())) for name in routable()}
    for channel, ids in pending.items():
        if ids:
            enqueue_deliveries_after_commit(delivery_queue(priority), channel, ids)
    badge_after_commit(row.badge_user_ids, toast_title=fanout.title, toast_tenant=fanout.tenant_id)
    return Batch(users=row.users, created=row.created, pending=pending, badge_user_ids=list(row.badge_user_ids),
                 finished=finished, title=fanout.title)  # fmt: skip


def mark_failed(fanout_id: int, error: str) -> None:
    """Record that the fanout stopped on an error (the sweeper does not restart a failed one)."""
    fanout = _locked(fanout_id)
    if fanout is not None and fanout.status == "running":
        fanout.status, fanout.error = "failed", error[:ERROR_TEXT_MAX]
        db.session.flush()


def run(fanout_id: int, size: int) -> dict:
    """Fan the notification out batch by batch until done; return what was written (idempotent, resumable)."""
    totals = {"batches": 0, "users": 0, "created": 0, **{name: 0 for name in routable()}}
    try:
        while (batch := run_batch(fanout_id, size)) is not None:
            commit()
            totals["batches"] += 1
            totals["users"] += batch.users
            totals["created"] += batch.created
            for channel, ids in batch.pending.items():
                totals[channel] += len(ids)
            if batch.finished:
                break
    except Exception as exc:
        db.session.rollback()
        mark_failed(fanout_id, f"{type(exc).__name__}: {exc}")
        commit()
        raise
    return totals


def start_due() -> int:
    """Make sure every running topic fanout has a live job (one lost with its worker gets a new one)."""
    for fanout_id in queries.running_fanouts():
        after_commit(topic_fanout_job(fanout_id))
    return commit().wait().get("jobs", 0)
