"""Figures about the ledger for people and monitors: the dashboard's windows, chart, latency and DLQ,
and the totals /metrics exports.

The windows walk `notification_deliveries_created_idx` (last hour, last day, per minute), the DLQ
figures walk `notification_deliveries_failed_idx`; nothing scans the whole ledger per dashboard
refresh. /metrics' totals are two GROUP BY scans per scrape (see app/ops/metrics.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from app.extensions import db
from app.models import DELIVERY_STATUSES

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


# --- totals for /metrics (computed at scrape time, so every process reports the same truth) -----

ATTEMPT_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)

_bucket_columns = ",\n       ".join(f"count(*) FILTER (WHERE duration_ms <= {b}) AS le_{b}" for b in ATTEMPT_BUCKETS_MS)
ATTEMPT_STATS_SQL = sa.text(
    f"""
SELECT provider, outcome, count(*) AS total, COALESCE(sum(duration_ms), 0) AS sum_ms,
       {_bucket_columns}
FROM delivery_attempts
GROUP BY provider, outcome
ORDER BY provider, outcome
"""
)

STATUS_COUNTS_SQL = sa.text(
    """
SELECT channel, status, COALESCE(error_kind, '') AS error_kind, count(*) AS total
FROM notification_deliveries
GROUP BY channel, status, COALESCE(error_kind, '')
ORDER BY channel, status
"""
)


def attempt_stats() -> list[sa.Row]:
    """Per (provider, outcome): count, total duration and cumulative latency bucket counts."""
    return list(db.session.execute(ATTEMPT_STATS_SQL))


def status_counts() -> list[sa.Row]:
    """Per (channel, status, error_kind): how many ledger rows; failed rows are the DLQ."""
    return list(db.session.execute(STATUS_COUNTS_SQL))


# Provider webhook events (app/hooks) by provider, event and whether a delivery had the message id.
PROVIDER_EVENT_COUNTS_SQL = sa.text(
    """
SELECT provider, event, delivery_id IS NOT NULL AS matched, count(*) AS total
FROM provider_events
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
"""
)


def provider_event_counts() -> list[sa.Row]:
    """Per (provider, event, matched): how many provider events were recorded (each once)."""
    return list(db.session.execute(PROVIDER_EVENT_COUNTS_SQL))
