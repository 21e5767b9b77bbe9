"""The only door to RQ: the queues, which queue work goes on, the job names, enqueueing after a commit.

Three queues, drained in order by every worker: `high`, `default`, `low`. A delivery goes on its
type's priority, except campaign deliveries and backlog drains (a DLQ bulk replay), which always go
on `low` so that a burst of them never delays a live notification; e-mail digests go on `low` too.
Jobs are named here, as the dotted paths RQ imports (jobs/*.py), so no code outside jobs/ imports a
job. Every enqueue is an effect run after its transaction commits (app/unitofwork.py), and tolerates
Redis being down: the rows are committed, and the sweeper enqueues them later.

Live traffic commits one or a few deliveries at a time (an API call per notification); a job each
would cost a worker more in RQ's bookkeeping than in sending. Those ids are coalesced instead: they
are pushed on a per-(queue, channel) list in Redis, and a wake flag (SET NX) makes sure one drain job
is waiting for the list; the drain job clears the flag first, then takes the list in batches
(app/delivery/engine.py drain). A commit after that clear sets the flag again and wakes another
drain, so no id waits for a job that has already looked. Bulk paths (campaigns, scheduled releases,
the sweeper, DLQ replays) already carry full batches and keep one job per batch.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

from flask import current_app
from redis.exceptions import RedisError
from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from app import keyspace, telemetry
from app.extensions import redis
from app.unitofwork import Effect, after_commit

log = logging.getLogger(__name__)

QUEUE_NAMES = ("high", "default", "low")
CAMPAIGN_QUEUE = "low"  # a campaign's fanout and its deliveries
BACKLOG_QUEUE = "low"  # deliveries replayed in bulk from the DLQ
OPERATIONS_QUEUE = "default"  # bulk DLQ operations themselves: quick set-based SQL, not behind a campaign

# The same choice in SQL, for statements that pick their rows' queue themselves (sweeper, DLQ replay).
DELIVERY_QUEUE_SQL = f"CASE WHEN n.campaign_id IS NULL THEN t.priority ELSE '{CAMPAIGN_QUEUE}' END"

# The jobs, by the dotted path RQ imports: thin entry points in jobs/ that call the domain.
DELIVER_BATCH_JOB = "jobs.delivery.deliver_batch"
DRAIN_JOB = "jobs.delivery.drain_deliveries"
FANOUT_JOB = "jobs.fanout.fanout_campaign"
TOPIC_FANOUT_JOB = "jobs.fanout.fanout_topic"
# A topic's fanout (someone commented on what you watch) is live traffic, not a campaign: not behind one on low.
TOPIC_FANOUT_QUEUE = "default"
BULK_OPERATION_JOB = "jobs.bulk.run_bulk_operation"
DIGEST_JOB = "jobs.digest.send_digests"
BADGE_SYNC_JOB = "jobs.devices.sync_badges"
DIGEST_QUEUE = "low"  # a digest is never urgent: live notifications go first
FANOUT_TIMEOUT_SECONDS = 6 * 3600  # a timeout only ends this run; the next one resumes from the cursor
BULK_TIMEOUT_SECONDS = 3600

# A drain job that was lost before it started (its worker killed, say) blocks new wakes this long at most;
# the sweeper wakes lists left without a flag, and the rows themselves are in PostgreSQL meanwhile.
DRAIN_WAKE_TTL_SECONDS = 60

# job.meta's key for the W3C trace context of the span that enqueued the job (app/telemetry.py); the worker
# opens the job's span under it (app/cli/worker.py). Absent when tracing is off.
TRACE_META = "trace"

# A job in one of these states will still run: enqueueing another with its id would run the work twice.
ALIVE = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED}


def delivery_queue(priority: str, from_campaign: bool = False) -> str:
    """The queue a delivery's job goes on: its type's priority, `low` for campaign rows."""
    if from_campaign:
        return CAMPAIGN_QUEUE
    return priority if priority in QUEUE_NAMES else "default"


def get_queue(name: str, connection=None) -> Queue:
    """Return this installation's RQ queue for the logical name, with the JSON serializer (never pickle)."""
    if name not in QUEUE_NAMES:
        raise ValueError(f"unknown queue {name!r}")
    return Queue(keyspace.queue_name(name), connection=connection or redis.client(), serializer=JSONSerializer)


def logical_queue_name(rq_name: str) -> str:
    """Return high/default/low for one of this installation's RQ queue names (others unchanged)."""
    prefix = keyspace.queue_name("")
    return rq_name[len(prefix) :] if rq_name.startswith(prefix) else rq_name


def trace_meta() -> dict | None:
    """The meta a job enqueued now carries: the current trace context, or None (tracing off, no span)."""
    found = telemetry.carrier()
    return {TRACE_META: found} if found else None


def chunks(ids: Sequence[int], size: int) -> Iterable[list[int]]:
    """Split ids into lists of at most size."""
    for start in range(0, len(ids), size):
        yield list(ids[start : start + size])


def enqueue_deliveries(queue_name: str, channel: str, delivery_ids: Sequence[int]) -> bool:
    """Enqueue deliver_batch(channel, ids) jobs on the queue, in one Redis pipeline.

    Returns False (and logs) when Redis is unreachable: the rows are already committed as
    `pending`, so the sweeper will enqueue them later.
    """
    if not delivery_ids:
        return True
    queue = get_queue(queue_name if queue_name in QUEUE_NAMES else "default")
    size = current_app.config["DELIVERY_BATCH_SIZE"]
    meta = trace_meta()
    try:
        with queue.connection.pipeline() as pipe:
            jobs = [
                # Job ids carry the namespace too: RQ keeps job hashes per Redis database, not per queue.
                Queue.prepare_data(
                    DELIVER_BATCH_JOB,
                    args=(channel, batch),
                    timeout=600,
                    result_ttl=60,
                    job_id=keyspace.job_id(uuid.uuid4().hex),
                    meta=meta,
                )  # fmt: skip
                for batch in chunks(list(delivery_ids), size)
            ]
            queue.enqueue_many(jobs, pipeline=pipe)
            pipe.execute()
    except RedisError as exc:
        log.warning("could not enqueue %d deliveries (sweeper will): %s", len(delivery_ids), exc)
        return False
    return True


def drain_keys(queue_name: str, channel: str) -> tuple[str, str]:
    """The (queue, channel) drain list's key and its wake flag's key."""
    return keyspace.key("drain", queue_name, channel), keyspace.key("drain-wake", queue_name, channel)


def _drain_channels_key() -> str:
    # The channels that have drain lists, so the sweeper and the dashboard find every list without a channel
    # list of their own (this layer sits below the channel registry).
    return keyspace.key("drain-channels")


# The channels with drain lists change only when a channel is first coalesced: the lag (read on every
# worker's dequeue) keeps them this long per process, the sweeper and the dashboard read them afresh.
DRAIN_CHANNELS_CACHE_SECONDS = 10.0
_drain_channels_seen: tuple[float, frozenset[str]] = (float("-inf"), frozenset())


def drain_channels(client, max_age: float = 0.0) -> list[str]:
    """The channels that have drain lists, read afresh unless this process read them under max_age ago."""
    global _drain_channels_seen
    at, known = _drain_channels_seen
    if time.monotonic() - at >= max_age:
        read = {c.decode() if isinstance(c, bytes) else c for c in client.smembers(_drain_channels_key())}
        known = frozenset(read | known) if max_age else frozenset(read)
        _drain_channels_seen = (time.monotonic(), known)
    return sorted(known)


def coalesce_deliveries(queue_name: str, channel: str, delivery_ids: Sequence[int]) -> bool:
    """Push ids on the (queue, channel) drain list and wake a drain job unless one is waiting already.

    Returns False (and logs) when Redis is unreachable: the rows are committed as `pending`, the sweeper
    enqueues them later.
    """
    if not delivery_ids:
        return True
    queue_name = queue_name if queue_name in QUEUE_NAMES else "default"
    items, flag = drain_keys(queue_name, channel)
    try:
        with redis.client().pipeline() as pipe:
            # The push comes first: a drain that clears the flag after this will see these ids.
            pipe.rpush(items, *(int(i) for i in delivery_ids))
            pipe.set(flag, 1, nx=True, ex=DRAIN_WAKE_TTL_SECONDS)
            pipe.sadd(_drain_channels_key(), channel)
            woken = pipe.execute()[1]
        if woken:
            _enqueue_drain(queue_name, channel, flag)
        _note_drain_channel(channel)
    except RedisError as exc:
        log.warning("could not enqueue %d deliveries (sweeper will): %s", len(delivery_ids), exc)
        return False
    return True


def _note_drain_channel(channel: str) -> None:
    """This process coalesced on channel: its lag reads see the channel's lists at once."""
    global _drain_channels_seen
    at, known = _drain_channels_seen
    if channel not in known:
        _drain_channels_seen = (at, known | {channel})


def _enqueue_drain(queue_name: str, channel: str, flag: str) -> None:
    queue = get_queue(queue_name)
    try:
        queue.enqueue_call(DRAIN_JOB, args=(queue_name, channel), timeout=600, result_ttl=60,
                           job_id=keyspace.job_id(uuid.uuid4().hex), meta=trace_meta())  # fmt: skip
    except RedisError:
        queue.connection.delete(flag)  # best effort: let the next commit (or the sweeper) wake one
        raise


def wake_drain(queue_name: str, channel: str) -> bool:
    """Enqueue a drain job for (queue, channel) unless its wake flag says one is waiting; True if enqueued."""
    flag = drain_keys(queue_name, channel)[1]
    if not redis.client().set(flag, 1, nx=True, ex=DRAIN_WAKE_TTL_SECONDS):
        return False
    _enqueue_drain(queue_name, channel, flag)
    return True


def start_drain(queue_name: str, channel: str) -> None:
    """Clear the wake flag: from now on a new commit wakes another drain (call before taking ids)."""
    redis.client().delete(drain_keys(queue_name, channel)[1])


def take_coalesced(queue_name: str, channel: str, count: int) -> list[int]:
    """Take up to count ids off the (queue, channel) drain list, oldest first."""
    taken = redis.client().lpop(drain_keys(queue_name, channel)[0], count)
    return [int(i) for i in taken or ()]


def coalesced_waiting(queue_names: Sequence[str] = QUEUE_NAMES) -> dict[str, int]:
    """Ids waiting on the drain lists, per queue (raises RedisError)."""
    client = redis.client()
    channels = drain_channels(client)
    with client.pipeline(transaction=False) as pipe:
        for name in queue_names:
            for channel in channels:
                pipe.llen(drain_keys(name, channel)[0])
        lengths = iter(pipe.execute())
    return {name: sum(next(lengths) for _ in channels) for name in queue_names}


def wake_orphaned_drains() -> int:
    """Wake a drain for every non-empty drain list without one (its drain died mid-list); return how many."""
    client = redis.client()
    lists = [(name, channel) for name in QUEUE_NAMES for channel in drain_channels(client)]
    with client.pipeline(transaction=False) as pipe:
        for name, channel in lists:
            pipe.llen(drain_keys(name, channel)[0])
        lengths = pipe.execute()
    waiting = [pair for pair, length in zip(lists, lengths, strict=True) if length]
    return sum(1 for name, channel in waiting if wake_drain(name, channel))


def higher_work_waiting(queue_name: str) -> bool:
    """Whether a queue drained before this one has jobs or coalesced ids waiting (a drain then yields)."""
    higher = QUEUE_NAMES[: QUEUE_NAMES.index(queue_name)] if queue_name in QUEUE_NAMES else ()
    if not higher:
        return False
    jobs = sum(get_queue(name).count for name in higher)
    return jobs > 0 or any(coalesced_waiting(higher).values())


def job_alive(connection, rq_job_id: str) -> bool:
    """Whether the RQ job with this id is queued, scheduled or running (raises RedisError)."""
    try:
        job = Job.fetch(rq_job_id, connection=connection, serializer=JSONSerializer)
        return job.get_status(refresh=False) in ALIVE
    except NoSuchJobError:
        return False


def enqueue_unless_alive(queue_name: str, func: str, arg: int, rq_job_id: str, timeout: int, what: str) -> bool:
    """Enqueue func(arg) as job rq_job_id unless that job is queued or running; False (logged) if Redis is down.

    For long jobs that own one row (a campaign's fanout, a bulk DLQ operation): the sweeper calls this
    again and again, and at most one job per row may exist.
    """
    try:
        queue = get_queue(queue_name)
        if not job_alive(queue.connection, rq_job_id):
            queue.enqueue_call(func, args=(int(arg),), job_id=rq_job_id, timeout=timeout, result_ttl=3600,
                               failure_ttl=7 * 86400, meta=trace_meta())  # fmt: skip
    except RedisError as exc:
        log.warning("could not enqueue %s (the sweeper retries): %s", what, exc)
        return False
    return True


# --- effects: what a transaction asks to enqueue once it has committed ------------------------------


@dataclass(frozen=True)
class EnqueueDeliveries(Effect):
    """deliver_batch jobs for these ledger rows; many commits' rows share jobs per queue and channel."""

    queue: str
    channel: str
    ids: tuple[int, ...]
    coalesce: bool = False  # live traffic: push on the drain list instead of a job per commit

    def merge_key(self):
        return ("deliveries", self.queue, self.channel, self.coalesce)

    def merge(self, other: EnqueueDeliveries) -> EnqueueDeliveries:
        return replace(self, ids=self.ids + other.ids)

    def run(self) -> bool:
        if self.coalesce:
            return coalesce_deliveries(self.queue, self.channel, list(self.ids))
        return enqueue_deliveries(self.queue, self.channel, list(self.ids))

    def count(self, result: object) -> dict[str, int]:
        return {"enqueued": len(self.ids)} if result else {}


@dataclass(frozen=True)
class EnqueueRowJob(Effect):
    """The one job that owns a row (a campaign's fanout, a bulk operation), unless it is already alive."""

    queue: str
    func: str
    id_prefix: str  # the job id is "<prefix>-<row id>": at most one live job per row
    row_id: int
    timeout: int
    what: str = field(default="", compare=False)

    @property
    def job_id(self) -> str:
        return keyspace.job_id(f"{self.id_prefix}-{self.row_id}")

    def merge_key(self):
        return ("row-job", self.func, self.row_id)

    def merge(self, other: EnqueueRowJob) -> EnqueueRowJob:
        return self

    def run(self) -> bool:
        return enqueue_unless_alive(self.queue, self.func, self.row_id, self.job_id, self.timeout, self.what)

    def count(self, result: object) -> dict[str, int]:
        return {"jobs": 1} if result else {}


@dataclass(frozen=True)
class EnqueueDigests(Effect):
    """send_digests jobs for these digest runs (app/digests), DELIVERY_BATCH_SIZE runs per job."""

    ids: tuple[int, ...]

    def merge_key(self):
        return ("digests",)

    def merge(self, other: EnqueueDigests) -> EnqueueDigests:
        return replace(self, ids=self.ids + other.ids)

    def run(self) -> bool:
        try:
            queue = get_queue(DIGEST_QUEUE)
            size = current_app.config["DELIVERY_BATCH_SIZE"]
            meta = trace_meta()
            with queue.connection.pipeline() as pipe:
                jobs = [
                    Queue.prepare_data(
                        DIGEST_JOB,
                        args=(batch,),
                        timeout=600,
                        result_ttl=60,
                        job_id=keyspace.job_id(uuid.uuid4().hex),
                        meta=meta,
                    )  # fmt: skip
                    for batch in chunks(list(self.ids), size)
                ]
                queue.enqueue_many(jobs, pipeline=pipe)
                pipe.execute()
        except RedisError as exc:
            log.warning("could not enqueue %d digests (sweeper will): %s", len(self.ids), exc)
            return False
        return True

    def count(self, result: object) -> dict[str, int]:
        return {"digests": len(self.ids)} if result else {}


@dataclass(frozen=True)
class EnqueueBadgeSync(Effect):
    """One badge sync per user per window (app/devices/badge.py): the first change in a window schedules a job
    at its end, which reads the count then, so the changes after it ride on it."""

    user_ids: frozenset[int]
    window: float

    def merge_key(self):
        return ("badge-sync",)

    def merge(self, other: EnqueueBadgeSync) -> EnqueueBadgeSync:
        return EnqueueBadgeSync(self.user_ids | other.user_ids, self.window)

    def run(self) -> int:
        client = redis.client()
        pipe = client.pipeline(transaction=False)
        users = sorted(self.user_ids)
        for user_id in users:
            pipe.set(badge_sync_key(user_id), 1, nx=True, ex=max(int(self.window * 2), 1))
        due = [user_id for user_id, fresh in zip(users, pipe.execute(), strict=True) if fresh]
        if due:
            queue = get_queue("default")
            queue.enqueue_in(timedelta(seconds=self.window), BADGE_SYNC_JOB, due, description=BADGE_SYNC_JOB,
                             meta=trace_meta())  # fmt: skip
        return len(due)

    def count(self, result: object) -> dict[str, int]:
        return {"badge_syncs": int(result)} if result else {}


def badge_sync_key(user_id: int) -> str:
    """Set while a user's badge sync is scheduled (the job clears it as it starts)."""
    return keyspace.key("badge-sync", str(user_id))


def enqueue_badge_sync_after_commit(user_id: int, window: float) -> None:
    """Schedule the user's phone badge sync after the commit, unless one is scheduled already."""
    after_commit(EnqueueBadgeSync(frozenset({user_id}), window))


def enqueue_digests_after_commit(ids: Sequence[int]) -> None:
    """Enqueue send_digests jobs for these digest runs once the current transaction commits."""
    if ids:
        after_commit(EnqueueDigests(tuple(int(i) for i in ids)))


def enqueue_deliveries_after_commit(queue_name: str, channel: str, ids: Sequence[int], coalesce: bool = False) -> None:
    """Enqueue deliver_batch jobs for ids once the current transaction commits (coalesce: on the drain list)."""
    if ids:
        after_commit(EnqueueDeliveries(queue_name, channel, tuple(int(i) for i in ids), coalesce))


def fanout_job(campaign_id: int) -> EnqueueRowJob:
    """The fanout job of a campaign (one live job per campaign)."""
    return EnqueueRowJob(CAMPAIGN_QUEUE, FANOUT_JOB, "fanout", int(campaign_id), FANOUT_TIMEOUT_SECONDS,
                         f"the fanout of campaign {campaign_id}")  # fmt: skip


def topic_fanout_job(fanout_id: int) -> EnqueueRowJob:
    """The job of a topic fanout (one live job per fanout)."""
    return EnqueueRowJob(TOPIC_FANOUT_QUEUE, TOPIC_FANOUT_JOB, "topic-fanout", int(fanout_id), FANOUT_TIMEOUT_SECONDS,
                         f"the fanout of topic notification {fanout_id}")  # fmt: skip


def bulk_operation_job(operation_id: int) -> EnqueueRowJob:
    """The job of a bulk DLQ operation (one live job per operation)."""
    return EnqueueRowJob(OPERATIONS_QUEUE, BULK_OPERATION_JOB, "bulk", int(operation_id), BULK_TIMEOUT_SECONDS,
                         f"bulk operation {operation_id}")  # fmt: skip
