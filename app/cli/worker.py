"""`flask --app wsgi worker [QUEUES…]`: an RQ worker over high, default, low inside the app context.

The default is the non-forking worker (`--simple`), chosen by tests/perf/bench_delivery.py: a forked
work horse per job costs tens of milliseconds (fork, a fresh PostgreSQL connection, teardown) against
a few for SimpleWorker, and delivery jobs are our own code in batches, so the fork's isolation buys
little. What a forked horse would protect us from is covered elsewhere: a job that dies mid-batch
leaves its rows `sending` under a lease, and the sweeper hands them back (tests/chaos). `--fork`
remains for jobs that leak memory or hang in C code.

A Redis outage ends an RQ worker's loop (a failed heartbeat, a job's bookkeeping) or its start (it
names its connection first): the command then starts a new worker with backoff instead of exiting,
so a restarted or replaced Redis needs no worker restart. Only SIGINT/SIGTERM (or --burst) end it.
"""

from __future__ import annotations

import logging
import signal
import threading
import time

import click
from flask import current_app
from flask.cli import with_appcontext
from flask_babel import ngettext
from redis.exceptions import RedisError
from rq import SimpleWorker, Worker
from rq.serializers import JSONSerializer

from app import backpressure, telemetry, unitofwork
from app.extensions import db, redis
from app.queueing import QUEUE_NAMES, TRACE_META, get_queue, logical_queue_name

log = logging.getLogger(__name__)

# A job counts as finished once what it committed has been handed to Redis (a forked horse exits hard).
EFFECTS_WAIT_SECONDS = 30.0
# Between a worker lost with Redis and the next one: doubling from the first to the cap.
RECONNECT_FIRST_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 10.0
# A worker that ran this long was healthy: the next loss starts the backoff from the beginning again.
HEALTHY_RUN_SECONDS = 30.0
# How often a heartbeat also checks that Redis still knows this worker (one HEXISTS).
REGISTRATION_CHECK_SECONDS = 1.0
# While low work is held, how long a worker waits on the other queues before it measures the lag again.
HOLD_POLL_SECONDS = 1


class _SessionPerJob:
    """Give every job a fresh SQLAlchemy session (a job that died mid-transaction can't poison the next),
    and let its post-commit effects out before the next job starts or the horse exits.

    With tracing on, the job runs in a span under the trace context its enqueuer left in job.meta.
    """

    def perform_job(self, job, queue):
        name = logical_queue_name(queue.name)
        try:
            with backpressure.running_job_from(name), _job_span(job, name) as span:
                done = super().perform_job(job, queue)
                if not done:  # the job raised: rq has its traceback (failed registry or a retry); the span says so
                    telemetry.failed(span, "the job raised")
                return done
        finally:
            unitofwork.wait_idle(current_app._get_current_object(), EFFECTS_WAIT_SECONDS)
            db.session.remove()
            if getattr(self, "_is_horse", False):
                # The horse exits with os._exit(): close its own connection properly first, export its spans.
                db.engine.dispose()
                telemetry.flush()


def _job_span(job, queue_name: str):
    """The job's span: a consumer of the trace its meta carries (a root span when it carries none)."""
    attributes = {"messaging.system": "rq", "messaging.destination.name": queue_name,
                  "messaging.message.id": job.id, "hato.job.function": job.func_name}  # fmt: skip
    return telemetry.span("hato.job", (job.meta or {}).get(TRACE_META), kind="consumer", **attributes)


class _OutlivesRedis:
    """Tell a stop asked by a signal from a loop that Redis ended, and register again in a Redis that lost us.

    A Redis restarted empty forgets the worker (its hash and the registries the console and /metrics
    read) while rq's loop reconnects on its own; the next heartbeat that finds no birth re-registers.
    """

    stop_asked = False
    # rq's own retries while dequeueing double up to a minute: after an outage work resumes within this.
    max_connection_wait_time = RECONNECT_MAX_SECONDS
    _registered_checked_at = float("-inf")

    def request_stop(self, signum, frame):
        self.stop_asked = True
        return super().request_stop(signum, frame)

    def heartbeat(self, timeout=None, pipeline=None):
        if pipeline is None and time.monotonic() - self._registered_checked_at >= REGISTRATION_CHECK_SECONDS:
            if not self.connection.hexists(self.key, "birth"):
                log.warning("worker %s: Redis lost its registration (restarted empty?); registering again", self.name)
                self.connection.delete(self.key)  # a job's heartbeat may have left a partial hash behind
                self.register_birth()
                self.set_state(self.get_state())
            self._registered_checked_at = time.monotonic()  # only once Redis answered
        return super().heartbeat(timeout, pipeline)


class _HoldsLowWork:
    """Take no job from `low` while the high queue lags, or while this is the worker kept free (app/backpressure.py).

    Meanwhile the worker listens on the queues above low only, for HOLD_POLL_SECONDS at a time, and
    looks again before each wait: low work resumes within a second of the lag falling. After a high
    job, a worker that also takes low work offers to be the one kept free for the next interactive work.
    """

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        started = time.monotonic()
        while True:
            # A burst run (no timeout) drains the queues and exits: nobody needs it kept free.
            if not backpressure.measure().held and (timeout is None or not self._kept_free()):
                return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
            if max_idle_time is not None and time.monotonic() - started >= max_idle_time:
                return None
            result = self._dequeue_above_low()
            if result is not None:
                return result

    def _low_queue(self):
        return next((q for q in self.queues if logical_queue_name(q.name) == backpressure.HELD_QUEUE), None)

    def _kept_free(self) -> bool:
        low = self._low_queue()
        return low is not None and backpressure.kept_free(self.name, low)

    def perform_job(self, job, queue):
        try:
            return super().perform_job(job, queue)
        finally:
            # Only a worker that also takes low work can be the one kept from it.
            if logical_queue_name(queue.name) == backpressure.WATCHED_QUEUE and self._low_queue() is not None:
                backpressure.keep_free_after_interactive(self.name)

    def _dequeue_above_low(self):
        everything = self._ordered_queues
        above = [q for q in everything if logical_queue_name(q.name) != backpressure.HELD_QUEUE]
        if not above:  # a worker of `low` alone has nothing else to take meanwhile
            self.heartbeat()
            time.sleep(HOLD_POLL_SECONDS)
            return None
        self._ordered_queues = above
        try:
            # An idle limit of one poll makes rq's loop return None instead of blocking again.
            return super().dequeue_job_and_maintain_ttl(HOLD_POLL_SECONDS, HOLD_POLL_SECONDS)
        finally:
            self._ordered_queues = everything


class AppWorker(_HoldsLowWork, _OutlivesRedis, _SessionPerJob, Worker):
    """The forking worker: each job runs in a child process with its own DB connection."""

    def main_work_horse(self, job, queue):
        # Runs in the child right after fork(): drop the inherited pool without closing its sockets,
        # which still belong to the parent, so the child opens its own connection.
        db.engine.dispose(close=False)
        return super().main_work_horse(job, queue)


class AppSimpleWorker(_HoldsLowWork, _OutlivesRedis, _SessionPerJob, SimpleWorker):
    """The non-forking worker: jobs run in this process and reuse its pooled DB connection."""


@click.command("worker")
@click.argument("queues", nargs=-1)
@click.option("--burst", is_flag=True, help="Stop when the queues are empty.")
@click.option(
    "--fork/--simple",
    "fork",
    default=False,
    show_default=True,
    help="Fork a work horse per job (isolation) or run jobs in this process (the default; "
    "see tests/perf/bench_delivery.py for the measured difference).",
)
@with_appcontext
def worker_command(queues: tuple[str, ...], burst: bool, fork: bool) -> None:
    """Run an RQ worker (JSON serializer, scheduler on) over QUEUES, default: high default low."""
    names = queues or QUEUE_NAMES
    unknown = [n for n in names if n not in QUEUE_NAMES]
    if unknown:
        message = ngettext(
            "unknown queue %(names)s; choose from %(choices)s",
            "unknown queues %(names)s; choose from %(choices)s",
            len(unknown),
            names=", ".join(unknown),
            choices=", ".join(QUEUE_NAMES),
        )
        raise click.BadParameter(message)
    connection = redis.client()
    worker_class = AppWorker if fork else AppSimpleWorker
    current_app.logger.info("worker listening on %s", ", ".join(names))
    work_until_stopped(
        lambda: worker_class(
            [get_queue(n, connection) for n in names], connection=connection, serializer=JSONSerializer
        ),
        burst,
    )


def work_until_stopped(make_worker, burst: bool) -> None:
    """Run make_worker()'s loop; when Redis ends it (or its start), start a new worker after a backoff.

    Returns when a signal asked the worker to stop, or after one run with burst (a Redis error then
    propagates: a burst run that could not reach Redis has failed).
    """
    stopping = threading.Event()
    backoff = RECONNECT_FIRST_SECONDS
    while not stopping.is_set():
        worker, started = None, time.monotonic()
        try:
            worker = make_worker()
            worker.work(burst=burst, with_scheduler=True, logging_level="INFO")
        except RedisError as exc:
            if burst:
                raise
            log.warning("worker lost Redis: %s", exc)
        if burst or (worker is not None and worker.stop_asked):
            return
        if time.monotonic() - started >= HEALTHY_RUN_SECONDS:
            backoff = RECONNECT_FIRST_SECONDS
        # The ended worker's signal handlers are still installed; between workers a signal just ends the wait.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stopping.set())
        log.warning("worker loop ended without a stop request; starting a new worker in %.1fs", backoff)
        stopping.wait(backoff)
        backoff = min(backoff * 2, RECONNECT_MAX_SECONDS)
