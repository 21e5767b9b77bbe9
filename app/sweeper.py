"""The sweeper: PostgreSQL is the truth, so whatever Redis lost is enqueued again from the tables.

`flask --app wsgi sweep` runs sweep_once() every SWEEP_INTERVAL_SECONDS (a separate process, not an
RQ scheduled job: it must keep working when Redis has lost everything). One pass: rows a kill switch
held on a channel resumed since are made due (app/delivery/switches.py); expired leases go back to
pending; rows held back by a breaker, a bucket or a pause longer than DELIVERY_MAX_AGE go to the DLQ
(`expired`); due pending rows nobody has enqueued (retries and deferrals that fell due, rows released
from a pause, and rows whose job Redis lost) are enqueued in batches on their queue, a backlog in up
to SWEEP_DUE_PASSES passes of SWEEP_LIMIT (take_due_backlog); coalesced live
ids whose drain job died get a new one; idempotency keys older than 24 h are pruned; snoozed
notifications whose time has come are woken; bulk inbox actions whose undo time has passed
are finished (a deleted row removed for good, app/inbox/bulk.py); a type written straight into
the table gets its first workflow version from its columns (app/workflows); due scheduled notifications are released
(release_scheduled, which the CLI loop also runs every SCHEDULER_INTERVAL_SECONDS); open badges move
when a scheduled announcement goes live or expires; due and running campaigns, and unfinished bulk
DLQ operations, get a job if theirs was lost; due e-mail digests are opened and enqueued
(app/digests/sweep.py); the webhook outbox gets the same lease, expiry and re-enqueue steps
(app/webhooks/service.py sweep); old notifications, ledger rows and expired announcements' reads are
deleted in small keyset batches for up to RETENTION_PASS_SECONDS (app/retention); the ledger's changes are
folded into the analytics rollups for up to ANALYTICS_ROLLUP_PASS_SECONDS (app/analytics).

Two sweepers may run at once (high availability): a pass runs only while its process holds a
PostgreSQL session advisory lock, taken without waiting on a connection of its own, so at most one
pass runs at a time and the other sweeper skips its turn. PostgreSQL, not Redis, holds the lock:
it keeps working when Redis is down or restarted empty, it needs no TTL that a long pass could
outlive, and a sweeper killed with -9 loses it the moment its connection closes. Steps that claim
rows (leases, due rows, snoozes, scheduled releases, digest runs, the webhook outbox) also stamp
them with SKIP LOCKED in the same statement, which keeps them exactly once against workers and
the between-pass scheduled releases; the lock covers what has no row to claim (the announcement
watermark, the check-then-enqueue of campaign and bulk-operation jobs, retention's walk).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import sqlalchemy as sa
from flask import current_app
from redis.exceptions import RedisError

from app.analytics import sweep as analytics
from app.announcements.live import announce_due
from app.campaigns.fanout import start_due
from app.delivery import due as due_rows
from app.delivery import service, switches
from app.delivery.dlq import resume_bulk_operations
from app.digests import service as digest_runs
from app.digests.sweep import sweep as sweep_digests
from app.extensions import db
from app.inbox.bulk import finish_expired
from app.inbox.service import wake_due
from app.notify import schedule
from app.queueing import QUEUE_NAMES, coalesced_waiting, get_queue, wake_orphaned_drains
from app.retention import service as retention
from app.topics import fanout as topic_fanouts
from app.unitofwork import commit
from app.webhooks import service as webhooks
from app.workflows import service as workflows

log = logging.getLogger(__name__)

# A queue holding at most this many jobs counts as drained: rows not touched for a while whose
# queue is drained are taken as lost and enqueued again.
IDLE_QUEUE_JOBS = 10

# This process's due walk across passes (a backlog is taken a pass at a time; see due_rows.DueCursor). Whoever
# leads starts from its own: a cursor left behind by a lost lead only starts a walk later, never skips a row.
DUE_CURSOR = due_rows.DueCursor()


# Session-level, so it spans the pass's many commits; released by unlock or by the connection closing.
TRY_LOCK_SQL = sa.text("SELECT pg_try_advisory_lock(hashtextextended('hato-sweeper', 0))")
UNLOCK_SQL = sa.text("SELECT pg_advisory_unlock(hashtextextended('hato-sweeper', 0))")


@contextmanager
def leadership() -> Iterator[bool]:
    """Hold the sweeper lock for the block if no other sweeper does; yield whether this one holds it."""
    # A connection of its own, outside the session (whose connection goes back to the pool at each commit).
    # An Engine's .engine is itself; tests bind the app to one Connection, whose .engine is the real one.
    conn = db.engine.engine.connect()
    held = False
    try:
        held = bool(conn.execute(TRY_LOCK_SQL).scalar_one())
        conn.commit()  # idle, not idle in transaction, while the pass runs on the session's own connection
        yield held
    finally:
        try:
            if held:
                conn.execute(UNLOCK_SQL)
                conn.commit()
        except Exception:
            conn.invalidate()  # closing the server session is what releases the lock then
        finally:
            conn.close()


def idle_queues() -> list[str]:
    """Queues that are (nearly) empty, their coalesced ids counted as jobs; none when Redis does not answer."""
    batch = max(int(current_app.config["DELIVERY_BATCH_SIZE"]), 1)
    try:
        waiting = coalesced_waiting()
        return [name for name in QUEUE_NAMES if get_queue(name).count + -(-waiting[name] // batch) <= IDLE_QUEUE_JOBS]
    except RedisError as exc:
        log.warning("queue depths unavailable (%s); only retries are enqueued this pass", exc)
        return []


def wake_drains() -> int:
    """Wake a drain job for coalesced ids whose drain died mid-list; 0 when Redis does not answer."""
    try:
        return wake_orphaned_drains()
    except RedisError as exc:
        log.warning("drain lists unavailable (%s); the stale-row step covers their rows", exc)
        return 0


def release_scheduled() -> int:
    """Release every due scheduled notification, one committed batch at a time; return how many were due.

    Needs no lock: each batch deletes its rows with SKIP LOCKED, so sweepers running side by side release
    each row exactly once (the CLI loop also runs this every SCHEDULER_INTERVAL_SECONDS between passes).
    Waits until the last batch's badge events and jobs are handed to Redis.
    """
    limit = current_app.config["SCHEDULER_BATCH_SIZE"]
    total = 0
    while True:
        try:
            due = schedule.release_due(limit)
            handoff = commit()
        except BaseException:
            db.session.rollback()
            raise
        total += due
        if due < limit:
            handoff.wait()
            return total


def take_due_backlog(config: Mapping, idle: list[str], cursor: due_rows.DueCursor, passes: int) -> dict:
    """Due passes, each committed and its jobs in Redis before the next, while each fills SWEEP_LIMIT (at most
    passes); return their counts.

    Without it a backlog waited SWEEP_INTERVAL_SECONDS between passes of SWEEP_LIMIT. Handing a pass's jobs over
    while the next pass's statement ran was measured too (bench_workflow, 80,000 rows): 1.31 s against 0.83 s
    pass by pass, the dispatcher thread's job building competing with the statements for the one interpreter.
    """
    passes_run, taken, enqueued = 0, 0, 0
    for _ in range(passes):
        try:
            groups = due_rows.take_due(config["SWEEP_REQUEUE_AFTER_SECONDS"], config["SWEEP_LIMIT"], idle, cursor)
            handoff = commit()
        except BaseException:
            db.session.rollback()
            raise
        enqueued += handoff.wait().get("enqueued", 0)
        found = sum(len(ids) for ids in groups.values())
        passes_run, taken = passes_run + 1, taken + found
        if found < config["SWEEP_LIMIT"]:
            break
    return {"passes": passes_run, "due": taken, "enqueued": enqueued}


def sweep_once() -> dict:
    """Run one pass and wait until what it enqueues is handed to Redis; return what it did.

    Returns {"locked": True} when another sweeper's pass holds the lock.
    """
    with leadership() as leader:
        return _pass(current_app.config) if leader else {"locked": True}


def _pass(config: Mapping) -> dict:
    """Every step of one pass, in order; the caller holds the sweeper lock."""
    try:
        versions = workflows.ensure_versions()  # a type written straight into the table: its first version
        resumed = switches.release_resumed(config)  # rows a kill switch held on channels resumed since: due now
        released = service.release_expired_leases(config["SWEEP_LIMIT"], config["RETRY_MAX_ATTEMPTS"])
        expired = service.expire_held(config["DELIVERY_MAX_AGE"], config["SWEEP_LIMIT"])  # held too long: DLQ
        expired += digest_runs.expire_held(config["DELIVERY_MAX_AGE"], config["SWEEP_LIMIT"])
        idle = idle_queues()
        due = due_rows.take_due(config["SWEEP_REQUEUE_AFTER_SECONDS"], config["SWEEP_LIMIT"], idle, DUE_CURSOR)
        pruned = service.prune_idempotency_keys()
        woken = wake_due(config["SWEEP_LIMIT"])  # snoozes that ended: back on top, unread, badge + toast
        finished = finish_expired(config["SWEEP_LIMIT"])  # bulk undo times that ended: deleted rows removed for good
        webhook_counts = webhooks.sweep(config)  # the webhook outbox: leases, held too long, due rows re-enqueued
        enqueued = commit().wait().get("enqueued", 0)
    except BaseException:
        db.session.rollback()
        raise
    taken = sum(len(ids) for ids in due.values())
    if taken >= config["SWEEP_LIMIT"]:  # a backlog: the rest of it now, not a pass per tick
        backlog = take_due_backlog(config, idle, DUE_CURSOR, config["SWEEP_DUE_PASSES"] - 1)
        taken, enqueued = taken + backlog["due"], enqueued + backlog["enqueued"]
    drains = wake_drains()  # coalesced ids left without a drain job (its worker was killed)
    scheduled = release_scheduled()  # due scheduled notifications: visible now, deliveries enqueued
    announce_due()
    start_due()
    topic_fanouts.start_due()  # running topic fanouts whose job was lost
    resume_bulk_operations()
    digests = sweep_digests(config)  # due digest runs opened (exactly once per user and period) and enqueued
    kept = retention.sweep(config)  # old rows deleted, one short transaction a batch, resumed next pass
    rolled = analytics.sweep(config)  # ledger changes folded into the hourly and daily rollups (issue 33)
    return {
        "digests": digests["enqueued"],
        "released": released,
        "resumed": resumed,
        "expired": expired,
        "due": taken,
        "enqueued": enqueued,
        "pruned": pruned,
        "woken": woken,
        "inbox_deleted": finished.removed,
        "drains": drains,
        "scheduled": scheduled,
        "workflow_versions": versions,
        "rolled_up": rolled,
        **webhook_counts,
        **kept.as_counts(),
    }
