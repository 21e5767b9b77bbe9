"""Dead-letter queue writes: replay or discard one failed delivery, or everything matching a filter.

Replay puts a row back to `pending` with its attempts reset (the attempt history stays in
delivery_attempts); discard marks it `skipped` with skip_reason 'discarded: <reason>', so it leaves
the DLQ but the ledger still says what happened and why. Both only touch rows that are still
`failed`, so a double click, a second job or a re-run changes nothing twice. A bulk operation walks
the matching rows in keyset batches of ids, no further than the newest delivery that existed when the
operator asked (rows that fail again after their replay are not replayed again by the same operation).
Every action writes an audit row. Nothing here commits; replayed rows' jobs (on `low` for a bulk
replay) and a bulk operation's own job are registered to follow the commit (app/unitofwork.py).
run_bulk_operation() is the job: one committed transaction per batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa
from flask_babel import gettext

from app.audit import service as audit
from app.delivery.ledger_queries import DlqFilters, dlq_count, unfinished_bulk_operations
from app.extensions import db
from app.limits import ERROR_TEXT_MAX, REASON_MAX
from app.models import BulkOperation, User
from app.queueing import (
    BACKLOG_QUEUE,
    DELIVERY_QUEUE_SQL,
    bulk_operation_job,
    enqueue_deliveries_after_commit,
)
from app.refusal import Refused
from app.unitofwork import after_commit, commit

# A bulk replay drains a backlog: its rows go on BACKLOG_QUEUE whatever their type, so it never gets
# ahead of live traffic. A single replay keeps its row's own queue (DELIVERY_QUEUE_SQL).

REPLAY_SET = (
    "status = 'pending', attempts = 0, next_attempt_at = now(), error_kind = NULL, "
    "locked_until = NULL, held_since = NULL, updated_at = now()"
)
DISCARD_SET = "status = 'skipped', skip_reason = :skip_reason, locked_until = NULL, updated_at = now()"
SETS = {"replay": REPLAY_SET, "discard": DISCARD_SET}

REPLAY_ONE_SQL = sa.text(
    f"""
UPDATE notification_deliveries d
SET {REPLAY_SET}
FROM notifications n JOIN notification_types t ON t.type = n.type
WHERE d.id = :id AND d.status = 'failed' AND n.id = d.notification_id
RETURNING d.channel, {DELIVERY_QUEUE_SQL} AS queue, d.last_error
"""
)

DISCARD_ONE_SQL = sa.text(
    f"""
UPDATE notification_deliveries
SET {DISCARD_SET}
WHERE id = :id AND status = 'failed'
RETURNING id, last_error
"""
)

MAX_ID_SQL = sa.text("SELECT coalesce(max(id), 0) FROM notification_deliveries")


def _bulk_sql(kind: str, conditions: list[str], join: bool) -> sa.TextClause:
    return sa.text(
        f"""
WITH batch AS (
  SELECT d.id FROM notification_deliveries d
  {"JOIN notifications n ON n.id = d.notification_id" if join else ""}
  WHERE {" AND ".join(conditions)} AND d.id > :cursor AND d.id <= :max_id
  ORDER BY d.id
  LIMIT :size
  FOR UPDATE OF d
),
changed AS (
  UPDATE notification_deliveries d
  SET {SETS[kind]}
  FROM batch
  WHERE d.id = batch.id AND d.status = 'failed'
  RETURNING d.id, d.channel
)
SELECT (SELECT count(*) FROM batch) AS seen,
       (SELECT max(id) FROM batch) AS last_id,
       (SELECT count(*) FROM changed) AS changed,
       (SELECT coalesce(array_agg(id ORDER BY id), '{{}}') FROM changed WHERE channel = 'email') AS email_ids,
       (SELECT coalesce(array_agg(id ORDER BY id), '{{}}') FROM changed WHERE channel = 'push') AS push_ids
"""
    )


@dataclass(frozen=True)
class Replayed:
    """A replayed row: the queue and channel its delivery job goes to."""

    queue: str
    channel: str


@dataclass(frozen=True)
class BulkBatch:
    """What one batch of a bulk operation changed; `pending` are the replayed ids (enqueued after its commit)."""

    changed: int
    pending: dict[str, list[int]] = field(default_factory=dict)
    finished: bool = False


def check_reason(reason: str | None) -> str:
    """Return the trimmed discard reason, or raise Refused."""
    reason = " ".join((reason or "").split())
    if not reason or len(reason) > REASON_MAX:
        raise Refused(
            gettext(
                "Say why in 1 to %(max)s characters (it is kept with the row and in the audit log).", max=REASON_MAX
            )
        )
    return reason


def replay_one(actor, delivery_id: int) -> Replayed:
    """Put one failed delivery back to pending (attempts reset); raise Refused if it is not failed."""
    row = db.session.execute(REPLAY_ONE_SQL, {"id": delivery_id}).first()
    if row is None:
        raise Refused(
            gettext("Delivery %(id)s is not in the dead-letter queue (already replayed or discarded).", id=delivery_id)
        )
    audit.record(
        actor,
        "dlq.replay",
        "delivery",
        delivery_id,
        before={"status": "failed", "last_error": row.last_error},
        after={"status": "pending", "attempts": 0},
    )
    enqueue_deliveries_after_commit(row.queue, row.channel, [delivery_id])  # the sweeper covers a Redis outage
    return Replayed(row.queue, row.channel)


def discard_one(actor, delivery_id: int, reason: str) -> None:
    """Take one failed delivery out of the DLQ as skipped 'discarded: <reason>'; raise Refused."""
    reason = check_reason(reason)
    row = db.session.execute(DISCARD_ONE_SQL, {"id": delivery_id, "skip_reason": f"discarded: {reason}"}).first()
    if row is None:
        raise Refused(
            gettext("Delivery %(id)s is not in the dead-letter queue (already replayed or discarded).", id=delivery_id)
        )
    audit.record(
        actor,
        "dlq.discard",
        "delivery",
        delivery_id,
        before={"status": "failed", "last_error": row.last_error},
        after={"status": "skipped", "skip_reason": f"discarded: {reason}"},
    )


def create_bulk(actor, kind: str, filters: DlqFilters, reason: str = "") -> BulkOperation:
    """Record a replay/discard of everything the filters match now; raise Refused when nothing does."""
    if kind not in SETS:
        raise Refused(gettext("Choose replay or discard."))
    reason = check_reason(reason) if kind == "discard" else ""
    total = dlq_count(filters)
    if total == 0:
        raise Refused(gettext("Nothing in the dead-letter queue matches these filters."))
    stored = {**filters.as_json(), "max_id": db.session.execute(MAX_ID_SQL).scalar_one()}
    operation = BulkOperation(
        kind=kind, filters=stored, reason=reason, status="queued", total=total, created_by=getattr(actor, "id", None)
    )
    db.session.add(operation)
    db.session.flush()
    after_commit(bulk_operation_job(operation.id))  # when Redis is down the sweeper starts it
    audit.record(
        actor,
        f"dlq.{kind}_all",
        "bulk_operation",
        operation.id,
        after={"filters": filters.as_json(), "matching": total, "reason": reason or None},
    )
    return operation


def _locked(operation_id: int) -> BulkOperation | None:
    return db.session.get(BulkOperation, operation_id, with_for_update=True, populate_existing=True)


def start_bulk(operation_id: int) -> BulkOperation | None:
    """Move a queued operation to running; return it while it runs, None once it is over."""
    operation = _locked(operation_id)
    if operation is not None and operation.status == "queued":
        operation.status = "running"
        db.session.flush()
    return operation if operation is not None and operation.status == "running" else None


def run_bulk_batch(operation_id: int, size: int) -> BulkBatch | None:
    """Replay or discard the next keyset batch of matching failed rows; None when the operation is over."""
    operation = _locked(operation_id)
    if operation is None or operation.status != "running":
        return None
    filters = DlqFilters.from_json(operation.filters)
    conditions, params = filters.conditions()
    row = db.session.execute(
        _bulk_sql(operation.kind, conditions, filters.joins_notifications),
        {
            **params,
            "cursor": operation.cursor_id,
            "max_id": operation.filters.get("max_id", 0),
            "size": size,
            "skip_reason": f"discarded: {operation.reason}",
        },
    ).one()
    operation.done += row.changed
    if row.last_id is not None:
        operation.cursor_id = row.last_id
    finished = row.seen < size
    if finished:
        _finish(operation, "done")
    db.session.flush()
    pending = {"email": list(row.email_ids), "push": list(row.push_ids)} if operation.kind == "replay" else {}
    for channel, ids in pending.items():
        enqueue_deliveries_after_commit(BACKLOG_QUEUE, channel, ids)
    return BulkBatch(row.changed, pending, finished)


def _finish(operation: BulkOperation, status: str, error: str | None = None) -> None:
    operation.status = status
    if status == "done":
        # Rows replayed or discarded by someone else meanwhile were not ours to count: the bar ends full.
        operation.total = operation.done
    operation.finished_at = db.session.execute(sa.select(sa.func.now())).scalar_one()
    db.session.flush()
    actor = db.session.get(User, operation.created_by) if operation.created_by else None
    audit.record(
        actor,
        f"dlq.{operation.kind}_all.{status}",
        "bulk_operation",
        operation.id,
        after={"changed": operation.done, **({"error": error} if error else {})},
    )


def fail_bulk(operation_id: int, error: str) -> None:
    """Record that a bulk operation stopped on an error (what it changed so far stays changed)."""
    operation = _locked(operation_id)
    if operation is not None and operation.status in ("queued", "running"):
        _finish(operation, "failed", error[:ERROR_TEXT_MAX])


def run_bulk_operation(operation_id: int, size: int) -> dict:
    """Replay or discard every matching failed delivery, one committed batch at a time; return what changed.

    Idempotent: only rows still `failed` are touched and the cursor never goes back, so a second run of
    the same operation, or a run after a crash, changes nothing twice. An error marks the operation
    failed (what it changed stays changed) and is raised again for RQ to record.
    """
    changed, handoffs = 0, []
    try:
        started = start_bulk(operation_id)
        commit()
        if started is None:
            return {"changed": 0}
        while (batch := run_bulk_batch(operation_id, size)) is not None:
            handoffs.append(commit())
            changed += batch.changed
            if batch.finished:
                break
    except Exception as exc:
        db.session.rollback()
        fail_bulk(operation_id, f"{type(exc).__name__}: {exc}")
        commit()
        raise
    enqueued = sum(handoff.wait().get("enqueued", 0) for handoff in handoffs)
    return {"changed": changed, "enqueued": enqueued}


def resume_bulk_operations() -> int:
    """Give each unfinished operation whose job was lost a new one (the sweeper calls this); return how many."""
    ids = unfinished_bulk_operations()
    for operation_id in ids:
        after_commit(bulk_operation_job(operation_id))
    return commit().wait().get("jobs", 0)
