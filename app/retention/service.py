"""The retention step of the sweeper: delete what the RETENTION_* settings let go, one short transaction a batch.

Each pass works for at most RETENTION_PASS_SECONDS; where a walk stopped is kept in Redis, so the next
pass resumes there (losing it only costs a walk from the start: every batch is idempotent). After a
complete walk over every table the step rests RETENTION_INTERVAL_SECONDS. Progress goes to the log, to
the sweeper's result and to a Redis hash of running totals that /metrics reports
(hato_retention_deleted_total, hato_retention_last_complete_walk_seconds).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from redis.exceptions import RedisError

from app import keyspace
from app.clock import db_now
from app.extensions import db, redis
from app.retention import queries

log = logging.getLogger(__name__)

# The oldest possible cursor: before every row.
START = (datetime(1, 1, 2, tzinfo=UTC), 0)
# The hash value of a walk that reached its end in the current round.
DONE = "done"
# A batch waits this long for a lock (a foreign-key cascade meeting a worker's row) before it gives up
# and the pass ends; the next pass tries again.
PRUNES = {
    "provider_events": queries.UNMATCHED_EVENTS_SQL,
    "webhook_events": queries.WEBHOOK_EVENTS_SQL,
    "topic_fanouts": queries.TOPIC_FANOUTS_SQL,
}
LOCK_TIMEOUT = "2s"
LOCK_NOT_AVAILABLE = "55P03"
STEPS = ("notifications", "deliveries", "provider_events", "webhook_events", "topic_fanouts", "announcement_reads")


@dataclass
class Progress:
    """What one call did: rows deleted per step, batches run, and whether the whole walk is complete."""

    deleted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STEPS, 0))
    batches: int = 0
    complete: bool = False
    resting: bool = False

    def as_counts(self) -> dict:
        """The sweeper's result keys."""
        return {
            **{f"retention_{step}": count for step, count in self.deleted.items()},
            "retention_batches": self.batches,
            "retention_complete": self.complete,
        }


@dataclass(frozen=True)
class Cutoffs:
    """The instants before which each rule deletes, fixed for one call."""

    read: datetime
    all: datetime
    ledger: datetime
    announcements: datetime

    @classmethod
    def at(cls, now: datetime, config: Mapping) -> Cutoffs:
        """The cutoffs of config's RETENTION_* days at now."""
        return cls(
            read=now - timedelta(days=config["RETENTION_READ_DAYS"]),
            all=now - timedelta(days=config["RETENTION_ALL_DAYS"]),
            ledger=now - timedelta(days=config["RETENTION_LEDGER_DAYS"]),
            announcements=now - timedelta(days=config["RETENTION_ANNOUNCEMENT_READS_DAYS"]),
        )


def _walk_key() -> str:
    return keyspace.key("retention", "walk")


def _rest_key() -> str:
    return keyspace.key("retention", "rest")


def stats_key() -> str:
    """The Redis hash with the running totals (deleted per step, batches, last complete walk)."""
    return keyspace.key("retention", "stats")


def totals() -> dict[str, float]:
    """The running totals of stats_key(): deleted_<step>, batches, last_complete_walk (empty when Redis is down)."""
    try:
        stored = redis.client().hgetall(stats_key())
    except RedisError as exc:
        log.warning("retention totals unavailable (%s)", exc)
        return {}
    return {
        (k.decode() if isinstance(k, bytes) else k): float(v.decode() if isinstance(v, bytes) else v)
        for k, v in stored.items()
    }


def _load_cursors() -> dict[str, tuple[datetime, int] | None]:
    """Where each walk stopped; None for a walk already complete in this round."""
    try:
        stored = redis.client().hgetall(_walk_key())
    except RedisError as exc:
        log.warning("retention cursors unavailable (%s); walking from the start", exc)
        return {}
    cursors = {}
    for step, value in stored.items():
        step = step.decode() if isinstance(step, bytes) else step
        value = value.decode() if isinstance(value, bytes) else value
        if value == DONE:
            cursors[step] = None
            continue
        at, _, row_id = value.partition("|")
        cursors[step] = (datetime.fromisoformat(at), int(row_id))
    return cursors


def _save_cursor(step: str, cursor: tuple[datetime, int] | None) -> None:
    try:
        value = DONE if cursor is None else f"{cursor[0].isoformat()}|{cursor[1]}"
        redis.client().hset(_walk_key(), step, value)
    except RedisError as exc:  # only a hint: the next walk starts over
        log.warning("retention cursor not saved (%s)", exc)


def resting() -> bool:
    """True while the step rests after a complete walk (False when Redis does not answer)."""
    try:
        return bool(redis.client().exists(_rest_key()))
    except RedisError:
        return False


def _finish_walk(interval: float) -> None:
    try:
        client = redis.client()
        client.delete(_walk_key())
        if interval > 0:
            client.set(_rest_key(), "1", px=int(interval * 1000))
        client.hset(stats_key(), "last_complete_walk", str(time.time()))
    except RedisError as exc:
        log.warning("retention walk state not saved (%s)", exc)


def _record(progress: Progress) -> None:
    if not progress.batches:
        return
    try:
        pipe = redis.client().pipeline(transaction=False)
        for step, count in progress.deleted.items():
            if count:
                pipe.hincrby(stats_key(), f"deleted_{step}", count)
        pipe.hincrby(stats_key(), "batches", progress.batches)
        pipe.execute()
    except RedisError as exc:
        log.warning("retention totals not recorded (%s)", exc)


def _batch(statement: sa.TextClause, params: dict):
    """Run one batch in its own short transaction and return its row."""
    try:
        db.session.execute(sa.text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
        row = db.session.execute(statement, params).one()
        db.session.commit()
    except BaseException:
        db.session.rollback()
        raise
    return row


def walk_batch(step: str, cutoffs: Cutoffs, cursor: tuple[datetime, int], limit: int):
    """One keyset batch of a walked table from cursor: (deleted, next cursor or None at the end)."""
    window = max(cutoffs.read, cutoffs.all) if step == "notifications" else cutoffs.ledger
    params = {
        "window": window,
        "after_at": cursor[0],
        "after_id": cursor[1],
        "limit": limit,
        "read_cutoff": cutoffs.read,
        "all_cutoff": cutoffs.all,
    }
    row = _batch(queries.WALKS[step], params)
    done = row.scanned < limit
    return row.deleted, None if done else (row.last_at, row.last_id)


def prune_batch(step: str, cutoffs: Cutoffs, limit: int) -> tuple[int, bool]:
    """One batch of a pruned set: (deleted, True when nothing of it is left)."""
    if step in PRUNES:
        deleted = _batch(PRUNES[step], {"cutoff": cutoffs.ledger, "limit": limit}).deleted
        return deleted, deleted < limit
    announcement = db.session.execute(queries.EXPIRED_ANNOUNCEMENT_SQL, {"cutoff": cutoffs.announcements}).scalar()
    if announcement is None:
        db.session.rollback()
        return 0, True
    deleted = _batch(queries.ANNOUNCEMENT_READS_SQL, {"announcement_id": announcement, "limit": limit}).deleted
    return deleted, deleted == 0  # 0: its reads are all held by someone; the next walk takes them


def sweep(config: Mapping, seconds: float | None = None, now: datetime | None = None) -> Progress:
    """Delete for up to seconds (RETENTION_PASS_SECONDS), resuming the saved walk; return the progress."""
    progress = Progress()
    if resting():
        progress.resting = True
        return progress
    budget = config["RETENTION_PASS_SECONDS"] if seconds is None else seconds
    deadline = time.monotonic() + budget
    limit = config["RETENTION_BATCH_SIZE"]
    pause = config["RETENTION_BATCH_PAUSE_SECONDS"]
    cutoffs = Cutoffs.at(now or db_now(), config)
    cursors = _load_cursors()
    try:
        for step in STEPS:
            finished = step in cursors and cursors[step] is None  # walked to its end earlier in this round
            cursor = cursors.get(step) or START
            while not finished:
                if progress.batches and time.monotonic() >= deadline:
                    return progress  # the first batch always runs, so even a tiny budget makes progress
                if step in queries.WALKS:
                    deleted, cursor = walk_batch(step, cutoffs, cursor, limit)
                    finished = cursor is None
                    _save_cursor(step, cursor)
                else:
                    deleted, finished = prune_batch(step, cutoffs, limit)
                    if finished:
                        _save_cursor(step, None)
                progress.deleted[step] += deleted
                progress.batches += 1
                if pause and not finished:
                    time.sleep(pause)  # a duty cycle: the inbox's statements get the database in between
        progress.complete = True
        _finish_walk(config["RETENTION_INTERVAL_SECONDS"])
        return progress
    except sa.exc.OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
            raise
        log.info("retention: a batch waited %s for a lock and gave up; the walk resumes next pass", LOCK_TIMEOUT)
        return progress
    finally:
        _record(progress)
        if any(progress.deleted.values()) or progress.complete:
            log.info(
                "retention: deleted %s in %d batches%s",
                ", ".join(f"{count} {step}" for step, count in progress.deleted.items()),
                progress.batches,
                "; walk complete" if progress.complete else "; resumes next pass",
            )
