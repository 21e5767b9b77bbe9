"""What the console's dashboard, /metrics and backpressure read about the queues: depths, lag, workers.

The lag is the one number the rest steers by (app/backpressure.py holds low work while the high queue's is
over its threshold): how long the oldest work nobody is doing yet has waited, drain lists included
(app/queueing.py keeps them), measured in one round trip.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from redis.exceptions import RedisError
from rq import Worker
from rq.job import Job
from rq.serializers import JSONSerializer
from rq.utils import get_call_string, utcparse

from app.extensions import redis
from app.queueing import (
    DRAIN_CHANNELS_CACHE_SECONDS,
    DRAIN_JOB,
    DRAIN_WAKE_TTL_SECONDS,
    QUEUE_NAMES,
    drain_channels,
    drain_keys,
    get_queue,
    logical_queue_name,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueueState:
    """One RQ queue: jobs waiting (each a batch of deliveries), how long its oldest work has waited, crashes."""

    name: str
    depth: int
    oldest_age: float | None
    failed_jobs: int
    running_jobs: int


@dataclass(frozen=True)
class WorkerState:
    """One live RQ worker."""

    name: str
    state: str
    queues: list[str]
    current_job: str | None
    last_heartbeat: datetime | None
    successful: int
    failed: int


@dataclass
class RedisState:
    """What Redis told us about the queues and workers (up=False when it did not answer)."""

    up: bool = True
    queues: list[QueueState] = field(default_factory=list)
    workers: list[WorkerState] = field(default_factory=list)


# Per queue, how long its oldest work that nobody is doing yet has waited, in one round trip (job hashes are
# named by ids only the server knows). A queued drain job for a list that a running drain is already taking
# from waits for nothing (that drain takes the ids the queued one was woken for), so it is passed over, and so
# is that list's wake flag. KEYS, per queue: its list, its started-job registry, then per channel its drain
# list and wake flag. ARGV: the job key prefix, channels per queue, head jobs to look at, then per queue and
# channel the description of its drain job. Returns per queue the enqueued_at to count from ('' for none),
# then per channel the wake flag's ms to live (-1 when it does not count).
OLDEST_WORK_LUA = """
local prefix, channels, look = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local per_queue = 2 + 2 * channels
local now = redis.call('TIME')[1]
local result = {}
for q = 0, #KEYS / per_queue - 1 do
  local base = q * per_queue
  local running = {}
  -- Entries are scored by when they expire: one left behind by a killed worker stops counting then.
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[base + 2], now, '+inf')) do
    local description = redis.call('HGET', prefix .. (string.match(member, '^(.*):[^:]*$') or member), 'description')
    if description then running[description] = true end
  end
  local draining = {}
  for c = 1, channels do
    local description = ARGV[3 + q * channels + c]
    draining[description] = running[description] == true
  end
  local stamp = ''
  for _, id in ipairs(redis.call('LRANGE', KEYS[base + 1], 0, look - 1)) do
    local job = redis.call('HMGET', prefix .. id, 'enqueued_at', 'description')
    if job[1] and not (job[2] and draining[job[2]]) then
      stamp = job[1]
      break
    end
  end
  result[#result + 1] = stamp
  for c = 1, channels do
    local ttl = -1
    if not draining[ARGV[3 + q * channels + c]] and redis.call('LLEN', KEYS[base + 1 + 2 * c]) > 0 then
      ttl = redis.call('PTTL', KEYS[base + 2 + 2 * c])
    end
    result[#result + 1] = ttl
  end
end
return result
"""
HEAD_JOBS_LOOKED_AT = 10  # queued drain jobs passed over before the oldest real work: a few at most


def _drain_description(queue_name: str, channel: str) -> str:
    """The description RQ gives a drain job of (queue, channel), as it computes it when the job is created."""
    return get_call_string(DRAIN_JOB, (queue_name, channel), {}, max_length=75)


def queue_lags(queue_names: Sequence[str] = QUEUE_NAMES) -> dict[str, float]:
    """Seconds the oldest work nobody is doing yet has waited in each queue, 0.0 when none (one round trip).

    That work is the queue's first job, or ids coalesced on one of its drain lists while no drain of that
    list runs (their wake flag is set by the first push after the last drain started, so its age is
    theirs). A drain job queued behind a running drain of the same list is passed over: the running one
    takes those ids. Ids on a list with no flag belong to a drain that is running. Raises RedisError.
    """
    client = redis.client()
    channels = drain_channels(client, DRAIN_CHANNELS_CACHE_SECONDS)
    keys, descriptions = [], []
    for name in queue_names:
        queue = get_queue(name, client)
        keys += [queue.key, queue.started_job_registry.key]
        for channel in channels:
            keys += list(drain_keys(name, channel))
            descriptions.append(_drain_description(name, channel))
    args = [Job.redis_job_namespace_prefix, len(channels), HEAD_JOBS_LOOKED_AT, *descriptions]
    replies = iter(client.eval(OLDEST_WORK_LUA, len(keys), *keys, *args))
    now = datetime.now(UTC)
    lags = {}
    for name in queue_names:
        stamp = next(replies)
        stamp = stamp.decode() if isinstance(stamp, bytes) else stamp
        lag = max((now - utcparse(stamp)).total_seconds(), 0.0) if stamp else 0.0
        for ttl_ms in (next(replies) for _ in channels):
            if ttl_ms > 0:
                lag = max(lag, DRAIN_WAKE_TTL_SECONDS - ttl_ms / 1000)
        lags[name] = lag
    return lags


def redis_state() -> RedisState:
    """Queue depths and lag, and the live workers; up=False when Redis does not answer."""
    try:
        connection = redis.client()
        queues = []
        ours: dict[str, Worker] = {}
        lags = queue_lags()
        for name in QUEUE_NAMES:
            queue = get_queue(name, connection)
            queues.append(QueueState(name, queue.count, lags[name] or None, queue.failed_job_registry.count,
                                     queue.started_job_registry.count))  # fmt: skip
            # Only the workers listening on this installation's queues (a shared Redis has others).
            ours.update((w.name, w) for w in Worker.all(queue=queue, serializer=JSONSerializer))
        workers = [
            WorkerState(
                w.name,
                str(w.get_state()),
                [logical_queue_name(q) for q in w.queue_names()],
                w.get_current_job_id(),
                w.last_heartbeat,
                w.successful_job_count,
                w.failed_job_count,
            )  # fmt: skip
            for w in ours.values()
        ]
    except RedisError as exc:
        log.warning("queue state unavailable: %s", exc)
        return RedisState(up=False)
    return RedisState(queues=queues, workers=sorted(workers, key=lambda w: w.name))
