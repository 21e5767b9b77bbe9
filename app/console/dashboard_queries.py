"""Dashboard reads: ledger figures from PostgreSQL, queues and workers from Redis, provider state.

The ledger windows walk `notification_deliveries_created_idx` (last hour, last day, per minute), the
DLQ figures walk `notification_deliveries_failed_idx`; nothing scans the whole ledger per refresh.
Redis answers are best effort: when it is down the page says so and still shows the database figures.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from redis.exceptions import RedisError
from rq import Worker
from rq.exceptions import NoSuchJobError
from rq.job import Job
from rq.serializers import JSONSerializer

import app.providers as providers_module
from app.extensions import db, redis
from app.models import DELIVERY_CHANNELS, DELIVERY_STATUSES
from app.queueing import QUEUE_NAMES, get_queue

log = logging.getLogger(__name__)

WINDOWS_SQL = sa.text(
    """
SELECT status,
       count(*) FILTER (WHERE created_at >= statement_timestamp() - interval '1 hour') AS hour,
       count(*) AS day
FROM notification_deliveries
WHERE created_at >= statement_timestamp() - interval '1 day'
GROUP BY status
"""
)

PER_MINUTE_SQL = sa.text(
    """
SELECT date_trunc('minute', created_at) AS minute, status, count(*) AS total
FROM notification_deliveries
WHERE created_at >= date_trunc('minute', statement_timestamp()) - interval '59 minutes'
GROUP BY 1, 2
"""
)

LATENCY_SQL = sa.text(
    """
SELECT count(*) AS sent,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM sent_at - created_at)) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM sent_at - created_at)) AS p95
FROM notification_deliveries
WHERE created_at >= statement_timestamp() - interval '1 hour' AND status = 'sent'
"""
)

DLQ_SQL = sa.text(
    """
SELECT count(*) AS size, min(updated_at) AS oldest,
       extract(epoch FROM statement_timestamp() - min(updated_at)) AS oldest_age
FROM notification_deliveries
WHERE status = 'failed'
"""
)

NOW_SQL = sa.text("SELECT date_trunc('minute', statement_timestamp())")


@dataclass(frozen=True)
class Latency:
    """Seconds from a delivery's creation to its send, for the ones sent out of the last hour."""

    sent: int
    p50: float | None
    p95: float | None


@dataclass(frozen=True)
class Dlq:
    """The dead-letter queue's size and how long its oldest row has waited."""

    size: int
    oldest: datetime | None
    oldest_age: float | None


@dataclass(frozen=True)
class QueueState:
    """One RQ queue: jobs waiting (each a batch of deliveries), how long the oldest has waited, crashes."""

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


@dataclass(frozen=True)
class ProviderState:
    """The provider a channel sends through, and its circuit breaker's state."""

    channel: str
    name: str
    configured: bool
    breaker: str


@dataclass
class RedisState:
    """What Redis told us (up=False when it did not answer)."""

    up: bool = True
    queues: list[QueueState] = field(default_factory=list)
    workers: list[WorkerState] = field(default_factory=list)


def status_windows() -> dict[str, dict[str, int]]:
    """Deliveries created in the last hour and day, per status (every status present, zeros included)."""
    result = {status: {"hour": 0, "day": 0} for status in DELIVERY_STATUSES}
    for row in db.session.execute(WINDOWS_SQL):
        result[row.status] = {"hour": row.hour, "day": row.day}
    return result


def per_minute() -> tuple[datetime, dict[tuple[datetime, str], int]]:
    """The current minute and {(minute, status): count} for deliveries created in the last 60 minutes."""
    now = db.session.execute(NOW_SQL).scalar_one()
    counts = {(row.minute, row.status): row.total for row in db.session.execute(PER_MINUTE_SQL)}
    return now, counts


def latency() -> Latency:
    """p50 and p95 of sent_at - created_at over the last hour's sent deliveries."""
    row = db.session.execute(LATENCY_SQL).one()
    return Latency(row.sent, row.p50, row.p95)


def dlq() -> Dlq:
    """The DLQ's size and oldest age."""
    row = db.session.execute(DLQ_SQL).one()
    return Dlq(row.size, row.oldest, float(row.oldest_age) if row.oldest_age is not None else None)


def _oldest_age(queue) -> float | None:
    ids = queue.get_job_ids(0, 0)
    if not ids:
        return None
    try:
        job = Job.fetch(ids[0], connection=queue.connection, serializer=JSONSerializer)
    except NoSuchJobError:
        return None
    if job.enqueued_at is None:
        return None
    now = datetime.now(job.enqueued_at.tzinfo)
    return max((now - job.enqueued_at).total_seconds(), 0.0)


def redis_state() -> RedisState:
    """Queue depths and lag, and the live workers; up=False when Redis does not answer."""
    try:
        connection = redis.client()
        queues = []
        for name in QUEUE_NAMES:
            queue = get_queue(name, connection)
            queues.append(
                QueueState(
                    name,
                    queue.count,
                    _oldest_age(queue),
                    queue.failed_job_registry.count,
                    queue.started_job_registry.count,
                )
            )
        workers = [
            WorkerState(
                w.name,
                str(w.get_state()),
                w.queue_names(),
                w.get_current_job_id(),
                w.last_heartbeat,
                w.successful_job_count,
                w.failed_job_count,
            )
            for w in Worker.all(connection=connection, serializer=JSONSerializer)
        ]
    except RedisError as exc:
        log.warning("dashboard: Redis unavailable: %s", exc)
        return RedisState(up=False)
    return RedisState(queues=queues, workers=sorted(workers, key=lambda w: w.name))


def breaker_states(names: list[str]) -> dict[str, str]:
    """Each provider's circuit breaker state: closed | open | half_open, n/a without breakers, unknown without Redis.

    Reads app/providers/breaker.py's snapshot when that module is there (a breaker that never tripped
    is closed); a deployment without breakers reports n/a. A module-level `app.providers.breaker_state(name)`
    function, if one is defined, takes precedence.
    """
    hook = getattr(providers_module, "breaker_state", None)
    if callable(hook):
        return {name: str(hook(name)) for name in names}
    try:
        from app.providers import breaker
    except ImportError:
        return {name: "n/a" for name in names}
    try:
        states, _ = breaker.snapshot(redis.client())
    except RedisError as exc:
        log.warning("breaker states unavailable: %s", exc)
        return {name: "unknown" for name in names}
    return {name: states.get(name, "closed") for name in names}


def provider_states(config: Mapping) -> list[ProviderState]:
    """Every provider of each delivery channel (in failover order when there are several) and its breaker."""
    rows = []
    names_for = getattr(providers_module, "provider_names", None)
    build_all = getattr(providers_module, "providers_for", None)
    for channel in DELIVERY_CHANNELS:
        if callable(names_for) and callable(build_all):
            names, built = names_for(channel, config), build_all(channel, config)
        else:
            first = providers_module.provider_for(channel, config)
            names, built = [config.get(f"{channel.upper()}_PROVIDER") or "—"], [first] if first else []
        configured = {provider.name for provider in built}
        states = breaker_states(sorted(configured))
        rows += [ProviderState(channel, name, name in configured, states.get(name, "n/a")) for name in names or ["—"]]
    return rows
