"""Backpressure (seed 004): while interactive work waits too long, low-priority work steps aside.

Workers take jobs strictly in queue order (high, default, low), so a free worker always takes
interactive work first. What delays it is every worker being inside a long low job: a campaign's
delivery batch (DELIVERY_BATCH_SIZE e-mails) or its fanout (FANOUT_BATCH_SIZE users a statement).
So, first, after interactive work one worker is kept free of low work (RESERVE_SECONDS, renewed by each
high job it runs) while another worker listens on low; second, while interactive work flows on busy CPUs
a low delivery batch sends one e-mail at a time (send_width); and while the high queue's lag
(app/queue_state.py queue_lags: how long its oldest work nobody is doing yet has waited) is over
BACKPRESSURE_HIGH_LAG_SECONDS:

- a worker takes no job from `low` (app/cli/worker.py);
- a running low delivery batch hands the rest of its rows back to pending at its next row, without
  counting a try (app/delivery/engine.py); the sweeper enqueues them again once they are due;
- a campaign's fanout stops after its batch in progress; the sweeper gives it a new job.

Low work resumes as soon as the lag is back under the threshold. Starvation: the hold only lasts
while high work has waited longer than the threshold, and strict queue order already gives such work
every free worker, so the hold takes nothing from low work that low work would otherwise have had,
except the rest of batches already running. Under a steady interactive load that keeps the lag just
over the threshold, interactive work is arriving faster than the workers send it: low work waits for
as long as that lasts, with or without backpressure, and the dashboard says so ("held since …"); each
time the lag dips under the threshold, low batches run again until it rises. A row handed back keeps
its attempts and is never expired for waiting (only rows held by a breaker or bucket are), so a
campaign finishes once the interactive overload ends. The hold can only outlast its cause by a lost
drain job's wake flag (DRAIN_WAKE_TTL_SECONDS at most), which the sweeper then replaces. The worker
kept free takes nothing from low work for long either: it is kept free only while another worker
listening on low exists and low work moves (kept_free), and only until RESERVE_SECONDS pass without
interactive work.

The lag is one Redis round trip, kept CACHE_SECONDS per process so that the send loop can ask at every
row. When the hold began is kept in Redis for the dashboard and /metrics: the first process that sees
the lag over the threshold records it, the first that sees it under clears it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from flask import current_app
from redis.exceptions import RedisError
from rq.worker_registration import WORKERS_BY_QUEUE_KEY

from app import keyspace
from app.extensions import redis
from app.queue_state import queue_lags

log = logging.getLogger(__name__)

WATCHED_QUEUE = "high"  # the interactive work whose lag is measured
HELD_QUEUE = "low"  # the work that steps aside: campaigns, DLQ replays, digests
CACHE_SECONDS = 0.25  # how old a measurement the send loop's per-row check may use
RESERVE_SECONDS = 10.0  # a worker that ran interactive work stays free of low work this long after it
LOW_STALL_SECONDS = 30.0  # the worker kept free takes a low job anyway when low's first job has not moved this long

# The queue of the job this thread (or task) is running, set by the worker around each job.
_job_queue: ContextVar[str | None] = ContextVar("hato_job_queue", default=None)


@dataclass(frozen=True)
class Pressure:
    """The high queue's lag against the threshold; held means low work waits."""

    lag: float  # seconds the oldest high work has waited
    threshold: float  # BACKPRESSURE_HIGH_LAG_SECONDS; 0: backpressure is off
    held: bool
    since: datetime | None = None  # when the hold began (status() only)
    activations: int = 0  # holds so far (status() only)
    kept_free: str | None = None  # the worker kept free of low work for interactive work (status() only)


class _Cache:
    """The last measurement of this process and when it was taken; whether this process recorded a hold."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pressure: Pressure | None = None
        self.taken_at = float("-inf")
        self.recorded: bool | None = None  # None: this process has not written the shared state yet
        self.unavailable = False  # Redis did not answer the last measurement
        self.low_head: bytes | None = None  # the low queue's first job when this worker last looked
        self.low_head_since = float("-inf")  # when it became the first


_cache = _Cache()


def _keys() -> tuple[str, str]:
    return keyspace.key("backpressure", "since"), keyspace.key("backpressure", "activations")


def _threshold() -> float:
    return float(current_app.config["BACKPRESSURE_HIGH_LAG_SECONDS"])


def measure() -> Pressure:
    """Measure the high queue's lag now (one round trip, plus one write when the hold starts or ends).

    Redis not answering counts as no pressure: the rows are safe in PostgreSQL, and holding low work
    because nobody can see the queues would only add a second outage to the first.
    """
    threshold = _threshold()
    if threshold <= 0:
        return Pressure(0.0, threshold, False)
    try:
        lag = queue_lags((WATCHED_QUEUE,))[WATCHED_QUEUE]
    except RedisError as exc:
        if not _cache.unavailable:  # once per outage: the send loop asks at every row
            log.warning("backpressure: queue lag unavailable (%s); low work is not held", exc)
        _cache.unavailable = True
        return Pressure(0.0, threshold, False)
    _cache.unavailable = False
    pressure = Pressure(lag, threshold, lag > threshold)
    _record(pressure.held)
    return pressure


def _record(held: bool) -> None:
    """Write the start or end of a hold, once per change this process sees."""
    if _cache.recorded is held:
        return
    since, activations = _keys()
    try:
        client = redis.client()
        if not held:
            if client.delete(since):
                log.warning("backpressure: the high queue's lag is back under %.1f s; low work resumes", _threshold())
        elif client.set(since, f"{time.time():.6f}", nx=True):  # to the µs: ms rounding could land after now()
            client.incr(activations)
            log.warning("backpressure: the high queue lags over %.1f s; low work is held", _threshold())
        _cache.recorded = held
    except RedisError as exc:
        log.warning("backpressure: could not record the hold (%s)", exc)


def current() -> Pressure:
    """This process's measurement if at most CACHE_SECONDS old, else a new one."""
    with _cache.lock:
        if _cache.pressure is None or time.monotonic() - _cache.taken_at > CACHE_SECONDS:
            _cache.pressure = measure()
            _cache.taken_at = time.monotonic()
        return _cache.pressure


def low_work_held() -> bool:
    """Whether the job running here came from the low queue and must step aside now (cached measurement).

    False outside a job taken from `low` (a high or default job, a drain of a live list, a test calling
    the engine directly), so the send loop can ask at every row.
    """
    return _job_queue.get() == HELD_QUEUE and current().held


@contextmanager
def running_job_from(queue_name: str) -> Iterator[None]:
    """Mark the code in the block as a job taken from queue_name (high/default/low), for low_work_held."""
    token = _job_queue.set(queue_name)
    try:
        yield
    finally:
        _job_queue.reset(token)


def send_width(width: int) -> int:
    """How many sends a batch may have in flight: 1 for a low job while interactive work flows and every CPU
    of the host is busy (1-minute load average at least the CPU count), else width.

    Busy CPUs are where the campaign and the interactive work meet: measured with a local SMTP server
    (tests/perf/bench_priority.py), four lanes sent the campaign no faster than one, and tripled the
    interactive p99. A provider far away leaves the CPUs idle while sends wait on the network, and keeps
    its lanes.
    """
    if width <= 1 or _job_queue.get() != HELD_QUEUE or _threshold() <= 0:
        return width
    if os.getloadavg()[0] < (os.cpu_count() or 1):
        return width
    try:
        interactive = bool(redis.client().exists(_reserve_key()))
    except RedisError:
        return width
    return 1 if interactive else width


# Take the reserve, or keep it, unless another worker holds it (one worker at a time is kept free).
RESERVE_LUA = """
local holder = redis.call('GET', KEYS[1])
if not holder or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""


def _reserve_key() -> str:
    return keyspace.key("backpressure", "reserve")


def keep_free_after_interactive(worker_name: str) -> bool:
    """After a high job: this worker is the one kept free of low work for RESERVE_SECONDS, unless another is."""
    if _threshold() <= 0:
        return False
    try:
        return bool(redis.client().eval(RESERVE_LUA, 1, _reserve_key(), worker_name, int(RESERVE_SECONDS * 1000)))
    except RedisError as exc:
        log.warning("backpressure: could not keep a worker free (%s)", exc)
        return False


def kept_free(worker_name: str, low_queue) -> bool:
    """Whether this worker is the one kept free of low work, another worker listens on low to do it, and low
    work is moving: its first job changed within LOW_STALL_SECONDS (or low is empty).

    The last condition is what keeps a dead worker from starving the campaign: a worker killed in the middle
    of a job stays registered until its key expires (the job's timeout: hours for a fanout), and meanwhile
    it would count as the other worker. A legitimately long low job (a fanout) only lends the kept-free
    worker to low work for one job at a time.
    """
    if _threshold() <= 0:
        return False
    try:
        with redis.client().pipeline(transaction=False) as pipe:
            pipe.get(_reserve_key())
            pipe.scard(WORKERS_BY_QUEUE_KEY % low_queue.name)
            pipe.lindex(low_queue.key, 0)
            holder, low_workers, head = pipe.execute()
    except RedisError:
        return False
    now = time.monotonic()
    if head != _cache.low_head:
        _cache.low_head, _cache.low_head_since = head, now
    stalled = head is not None and now - _cache.low_head_since > LOW_STALL_SECONDS
    return holder == worker_name.encode() and low_workers > 1 and not stalled


def status() -> Pressure:
    """A fresh measurement with when the hold began, how many holds there were and the worker kept free."""
    pressure = measure()
    since_key, activations_key = _keys()
    try:
        since, activations, kept_free = redis.client().mget(since_key, activations_key, _reserve_key())
    except RedisError:
        return pressure
    return replace(
        pressure,
        since=datetime.fromtimestamp(float(since), UTC) if since and pressure.held else None,
        activations=int(activations or 0),
        kept_free=kept_free.decode() if kept_free and pressure.threshold > 0 else None,
    )
