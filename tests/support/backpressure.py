"""Queue states for backpressure tests: jobs that look as if they had waited, measurements forgotten."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rq.job import Job
from rq.utils import utcformat

from app import backpressure
from app.extensions import redis
from app.queueing import get_queue


def age(job_id: str, seconds: float) -> None:
    """Make a queued job look enqueued `seconds` ago (as if it had waited that long)."""
    enqueued = datetime.now(UTC) - timedelta(seconds=seconds)
    redis.client().hset(Job.key_for(job_id), "enqueued_at", utcformat(enqueued))


def queued_job(queue: str, waited: float = 0.0) -> str:
    """Enqueue a real delivery job for no rows on queue; return its id, aged by `waited` seconds."""
    job = get_queue(queue).enqueue_call("jobs.delivery.deliver_batch", args=("email", []), result_ttl=60)
    if waited:
        age(job.id, waited)
    return job.id


def forget_measurements(monkeypatch) -> None:
    """No measurement cached, and no hold recorded, by an earlier test in this process."""
    monkeypatch.setattr(backpressure, "_cache", backpressure._Cache())
