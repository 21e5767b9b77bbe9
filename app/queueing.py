"""The web side's only door to RQ: named priority queues, batch enqueue, Redis-down tolerance."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from flask import current_app
from redis.exceptions import RedisError
from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from app.extensions import redis

log = logging.getLogger(__name__)

QUEUE_NAMES = ("high", "default", "low")
DELIVER_BATCH_JOB = "jobs.delivery.deliver_batch"
# A job in one of these states will still run: enqueueing another with its id would run the work twice.
ALIVE = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED}


def get_queue(name: str, connection=None) -> Queue:
    """Return the RQ queue called name, with the JSON serializer (never pickle)."""
    if name not in QUEUE_NAMES:
        raise ValueError(f"unknown queue {name!r}")
    return Queue(name, connection=connection or redis.client(), serializer=JSONSerializer)


def chunks(ids: Sequence[int], size: int) -> Iterable[list[int]]:
    """Split ids into lists of at most size."""
    for start in range(0, len(ids), size):
        yield list(ids[start : start + size])


def enqueue_deliveries(priority: str, channel: str, delivery_ids: Sequence[int]) -> bool:
    """Enqueue deliver_batch(channel, ids) jobs on the priority queue, in one Redis pipeline.

    Returns False (and logs) when Redis is unreachable: the rows are already committed as
    `pending`, so the sweeper will enqueue them later; the caller's request still succeeds.
    """
    if not delivery_ids:
        return True
    queue = get_queue(priority if priority in QUEUE_NAMES else "default")
    size = current_app.config["DELIVERY_BATCH_SIZE"]
    try:
        with queue.connection.pipeline() as pipe:
            jobs = [
                Queue.prepare_data(DELIVER_BATCH_JOB, args=(channel, batch), timeout=600, result_ttl=60)
                for batch in chunks(list(delivery_ids), size)
            ]
            queue.enqueue_many(jobs, pipeline=pipe)
            pipe.execute()
    except RedisError as exc:
        log.warning("could not enqueue %d deliveries (sweeper will): %s", len(delivery_ids), exc)
        return False
    return True


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
            queue.enqueue_call(
                func, args=(int(arg),), job_id=rq_job_id, timeout=timeout, result_ttl=3600, failure_ttl=7 * 86400
            )
    except RedisError as exc:
        log.warning("could not enqueue %s (the sweeper retries): %s", what, exc)
        return False
    return True
