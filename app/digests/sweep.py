"""The sweeper's digest step: open the due runs (set-based, one statement per batch) and enqueue their jobs.

Periods start on whole minutes (the top of the hour, a user's HH:MM), so runs are opened at most once
per minute per process; handing runs to jobs (new ones, deferred ones that fell due, and ones whose
worker died with the lease) happens every pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from app.clock import db_now
from app.digests import service
from app.extensions import db
from app.queueing import enqueue_digests_after_commit
from app.unitofwork import commit

_last_build: dict[str, datetime] = {}


def open_due(now: datetime, config: Mapping) -> dict:
    """Open every due run as of now, one committed statement per DIGEST_BATCH_SIZE waiting e-mails."""
    limit = int(config["DIGEST_BATCH_SIZE"])
    after, opened, taken = 0, 0, 0
    while True:
        try:
            built = service.build_batch(now, after, limit, config["DEFAULT_TIMEZONE"])
            commit()
        except BaseException:
            db.session.rollback()
            raise
        opened, taken = opened + built.opened, taken + built.taken
        if built.seen < limit or built.last is None:
            return {"opened": opened, "taken": taken}
        after = built.last


def sweep(config: Mapping, now: datetime | None = None) -> dict:
    """One pass: open due runs (once per minute unless now is given), then enqueue the runs due a job."""
    result = {"opened": 0, "taken": 0}
    current = now or db_now()
    minute = current.replace(second=0, microsecond=0)
    if now is not None or _last_build.get("minute") != minute:
        result = open_due(current, config)
        _last_build["minute"] = minute
    try:
        ids = service.take_due(float(config["SWEEP_REQUEUE_AFTER_SECONDS"]), int(config["SWEEP_LIMIT"]))
        enqueue_digests_after_commit(ids)
        commit().wait()
    except BaseException:
        db.session.rollback()
        raise
    return {**result, "enqueued": len(ids)}
