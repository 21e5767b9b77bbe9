"""run_bulk_operation(op_id): the RQ job behind "replay / discard everything matching" on the DLQ page.

Thin: the statements are app/console/ledger_service.py. Each keyset batch is committed with the
operation's cursor and progress, then its replayed rows are enqueued (on `low`). Idempotent: only
rows still `failed` are touched and the cursor never goes back, so a second run of the same
operation, or a run after a crash, changes nothing twice. The sweeper calls resume_bulk_operations()
every pass, so an operation whose job Redis lost (or never got) still runs.
"""

from __future__ import annotations

from flask import current_app

from app.console import ledger_queries, ledger_service
from app.extensions import db
from app.queueing import enqueue_deliveries, enqueue_unless_alive

BULK_JOB = "jobs.bulk.run_bulk_operation"
# The operation itself is quick set-based SQL; on `default` it does not wait behind a campaign.
QUEUE = "default"


def run_bulk_operation(operation_id: int) -> dict:
    """Replay or discard every matching failed delivery in batches; return how many rows changed."""
    operation_id = int(operation_id)
    size = int(current_app.config["BULK_BATCH_SIZE"])
    changed = 0
    try:
        started = ledger_service.start_bulk(operation_id)
        db.session.commit()
        if started is None:
            return {"changed": 0}
        while (batch := ledger_service.run_bulk_batch(operation_id, size)) is not None:
            db.session.commit()
            for channel, ids in batch.pending.items():
                enqueue_deliveries(ledger_service.BULK_PRIORITY, channel, ids)  # the sweeper covers a Redis outage
            changed += batch.changed
            if batch.finished:
                break
    except Exception as exc:
        db.session.rollback()
        ledger_service.fail_bulk(operation_id, f"{type(exc).__name__}: {exc}")
        db.session.commit()
        raise
    return {"changed": changed}


def enqueue_bulk(operation_id: int) -> bool:
    """Enqueue the operation's job unless one is queued or running; False (logged) when Redis is down."""
    return enqueue_unless_alive(
        QUEUE, BULK_JOB, operation_id, f"bulk-{int(operation_id)}", 3600, f"bulk operation {operation_id}"
    )


def resume_bulk_operations() -> int:
    """Give each unfinished operation whose job was lost a new one (the sweeper calls this); return how many."""
    ids = ledger_queries.unfinished_bulk_operations()
    db.session.rollback()  # end the read before talking to Redis
    return sum(1 for operation_id in ids if enqueue_bulk(operation_id))
