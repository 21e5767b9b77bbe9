"""The sweeper: PostgreSQL is the truth, so whatever Redis lost is enqueued again from the tables.

`flask --app wsgi sweep` runs sweep_once() every SWEEP_INTERVAL_SECONDS (a separate process, not an
RQ scheduled job: it must keep working when Redis has lost everything). One pass: expired leases go
back to pending; rows held back by a breaker or bucket longer than DELIVERY_MAX_AGE go to the DLQ
(`expired`); due pending rows nobody has enqueued (retries and deferrals that fell due, and rows
whose job Redis lost) are enqueued in batches on their queue; idempotency keys older than 24 h are
pruned; snoozed notifications whose time has come are woken; due scheduled notifications are
released (release_scheduled, which the CLI loop also runs every SCHEDULER_INTERVAL_SECONDS); open
badges move when a scheduled announcement goes live or expires; due and running campaigns, and
unfinished bulk DLQ operations, get a job if theirs was lost; due e-mail digests are opened and
enqueued (app/digests/sweep.py); the webhook outbox gets the same lease, expiry and re-enqueue steps
(app/webhooks/service.py sweep); old notifications, ledger rows and expired announcements' reads are
deleted in small keyset batches for up to RETENTION_PASS_SECONDS (app/retention). Two sweepers never enqueue the same
row: taking a row stamps it in the same statement (SKIP LOCKED), and a short Redis lock keeps a
second sweeper from even trying meanwhile.
"""

from __future__ import annotations

import logging
import uuid

from flask import current_app
from redis.exceptions import RedisError

from app import keyspace
from app.announcements.live import announce_due
from app.campaigns.fanout import start_due
from app.delivery import service
from app.delivery.dlq import resume_bulk_operations
from app.digests.sweep import sweep as sweep_digests
from app.extensions import db, redis
from app.inbox.service import wake_due
from app.notify import schedule
from app.queueing import QUEUE_NAMES, get_queue
from app.retention import service as retention
from app.unitofwork import commit
from app.webhooks import service as webhooks

log = logging.getLogger(__name__)

# A queue holding at most this many jobs counts as drained: rows not touched for a while whose
# queue is drained are taken as lost and enqueued again.
IDLE_QUEUE_JOBS = 10


def lock_key() -> str:
    """The key only the sweeper holding it may sweep under."""
    return keyspace.key("sweeper", "lock")


def _acquire_lock(ttl_seconds: float) -> str | None:
    """Take the sweeper lock; return its token, "" when Redis is down (the ledger still guards), or None."""
    token = uuid.uuid4().hex
    try:
        got = redis.client().set(lock_key(), token, nx=True, px=max(int(ttl_seconds * 1000), 1000))
    except RedisError as exc:
        log.warning("sweeper lock unavailable (%s); sweeping without it", exc)
        return ""
    return token if got else None


def _release_lock(token: str) -> None:
    if not token:
        return
    try:
        # Delete only our own lock: compare-and-delete in one server-side step.
        redis.client().eval(
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
            1,
            lock_key(),
            token,
        )
    except RedisError as exc:
        log.warning("could not release the sweeper lock (it expires by itself): %s", exc)


def idle_queues() -> list[str]:
    """Queues that are (nearly) empty; none when Redis does not answer."""
    try:
        return [name for name in QUEUE_NAMES if get_queue(name).count <= IDLE_QUEUE_JOBS]
    except RedisError as exc:
        log.warning("queue depths unavailable (%s); only retries are enqueued this pass", exc)
        return []


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


def sweep_once() -> dict:
    """Run one pass and wait until what it enqueues is handed to Redis; return what it did.

    Returns {"locked": True} when another sweeper holds the lock.
    """
    config = current_app.config
    token = _acquire_lock(config["SWEEP_INTERVAL_SECONDS"] * 2 + 5)
    if token is None:
        return {"locked": True}
    try:
        released = service.release_expired_leases(config["SWEEP_LIMIT"], config["RETRY_MAX_ATTEMPTS"])
        expired = service.expire_held(config["DELIVERY_MAX_AGE"], config["SWEEP_LIMIT"])  # held too long: DLQ
        due = service.take_due(config["SWEEP_REQUEUE_AFTER_SECONDS"], config["SWEEP_LIMIT"], idle_queues())
        pruned = service.prune_idempotency_keys()
        woken = wake_due(config["SWEEP_LIMIT"])  # snoozes that ended: back on top, unread, badge + toast
        webhook_counts = webhooks.sweep(config)  # the webhook outbox: leases, held too long, due rows re-enqueued
        enqueued = commit().wait().get("enqueued", 0)
    except BaseException:
        db.session.rollback()
        raise
    finally:
        _release_lock(token)
    scheduled = release_scheduled()  # due scheduled notifications: visible now, deliveries enqueued
    announce_due()
    start_due()
    resume_bulk_operations()
    digests = sweep_digests(config)  # due digest runs opened (exactly once per user and period) and enqueued
    kept = retention.sweep(config)  # old rows deleted, one short transaction a batch, resumed next pass
    return {
        "digests": digests["enqueued"],
        "released": released,
        "expired": expired,
        "due": sum(len(ids) for ids in due.values()),
        "enqueued": enqueued,
        "pruned": pruned,
        "woken": woken,
        "scheduled": scheduled,
        **webhook_counts,
        **kept.as_counts(),
    }
