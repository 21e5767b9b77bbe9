"""The sweeper: PostgreSQL is the truth, so whatever Redis lost is re-enqueued from the ledger.

`flask --app wsgi sweep` runs sweep_once() every SWEEP_INTERVAL_SECONDS (a separate process, not an
RQ scheduled job: it must keep working when Redis has lost everything). Expired leases go back to
pending; due pending rows nobody has enqueued (retries and deferrals that fell due, and rows whose
job Redis lost) are enqueued in batches on their type's priority queue; idempotency keys older than
24 h are pruned. Two sweepers never enqueue the same row: taking a row stamps it in the same
statement (SKIP LOCKED), and a short Redis lock keeps a second sweeper from even trying meanwhile.
"""

from __future__ import annotations

import logging
import signal
import threading
import uuid

import click
from flask import current_app
from flask.cli import with_appcontext
from redis.exceptions import RedisError

from app.delivery import service
from app.extensions import db, redis
from app.queueing import QUEUE_NAMES, enqueue_deliveries, get_queue
from jobs.announcements import announce_due
from jobs.bulk import resume_bulk_operations
from jobs.fanout import start_due_campaigns

log = logging.getLogger(__name__)

LOCK_KEY = "hato:sweeper:lock"
# A queue holding at most this many jobs counts as drained: rows not touched for a while whose
# priority has such a queue are taken as lost and enqueued again.
IDLE_QUEUE_JOBS = 10


def _acquire_lock(ttl_seconds: float) -> str | None:
    """Take the sweeper lock; return its token, "" when Redis is down (the ledger still guards), or None."""
    token = uuid.uuid4().hex
    try:
        got = redis.client().set(LOCK_KEY, token, nx=True, px=max(int(ttl_seconds * 1000), 1000))
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
            LOCK_KEY,
            token,
        )
    except RedisError as exc:
        log.warning("could not release the sweeper lock (it expires by itself): %s", exc)


def idle_priorities() -> list[str]:
    """Priorities whose queue is (nearly) empty; none when Redis does not answer."""
    try:
        return [name for name in QUEUE_NAMES if get_queue(name).count <= IDLE_QUEUE_JOBS]
    except RedisError as exc:
        log.warning("queue depths unavailable (%s); only retries are enqueued this pass", exc)
        return []


def sweep_once() -> dict:
    """Run one sweep; return what it did (or {"locked": True} when another sweeper holds the lock)."""
    config = current_app.config
    token = _acquire_lock(config["SWEEP_INTERVAL_SECONDS"] * 2 + 5)
    if token is None:
        return {"locked": True}
    try:
        released = service.release_expired_leases(config["SWEEP_LIMIT"], config["RETRY_MAX_ATTEMPTS"])
        due = service.take_due(config["SWEEP_REQUEUE_AFTER_SECONDS"], config["SWEEP_LIMIT"], idle_priorities())
        pruned = service.prune_idempotency_keys()
        db.session.commit()
    except BaseException:
        db.session.rollback()
        _release_lock(token)
        raise
    try:
        enqueued = 0
        for (priority, channel), ids in due.items():
            # A failed enqueue leaves the rows stamped; they come round again after the stale window.
            if enqueue_deliveries(priority, channel, ids):
                enqueued += len(ids)
    finally:
        _release_lock(token)
    announce_due()  # scheduled announcements move open badges when their time comes (jobs/announcements.py)
    start_due_campaigns()  # scheduled campaigns start when due; a lost fanout job is enqueued again (jobs/fanout.py)
    resume_bulk_operations()  # a DLQ bulk operation whose job was lost gets a new one (jobs/bulk.py)
    return {"released": released, "due": sum(len(ids) for ids in due.values()), "enqueued": enqueued, "pruned": pruned}


@click.command("sweep")
@click.option("--once", is_flag=True, help="Sweep one time and exit.")
@with_appcontext
def sweep_command(once: bool) -> None:
    """Run the sweeper loop (every SWEEP_INTERVAL_SECONDS) until SIGINT/SIGTERM."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    interval = float(current_app.config["SWEEP_INTERVAL_SECONDS"])
    stop = threading.Event()
    if not once:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
    log.info("sweeper running every %.1fs", interval)
    while True:
        try:
            result = sweep_once()
            if result.get("released") or result.get("enqueued") or result.get("pruned"):
                log.info("sweep: %s", result)
        except Exception:  # a database or Redis outage must not end the loop; it is logged and retried
            log.exception("sweep failed; retrying in %.1fs", interval)
        finally:
            db.session.remove()
        if once or stop.wait(interval):
            break
