"""Webhook reads for the console: endpoints with their queue figures, one endpoint, its recent attempts."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db

OUTCOMES = ("sent", "transient", "permanent", "held")
ATTEMPTS_SHOWN = 50

# The product knows its users by external id: every event naming a user carries it beside Hato's own id.
EXTERNAL_IDS_SQL = sa.text("SELECT id, external_id FROM users WHERE id = ANY(CAST(:ids AS bigint[]))")

ENDPOINTS_SQL = sa.text(
    """
SELECT e.id, e.url, e.description, e.event_types, e.enabled, e.secret_hint, e.created_at,
       coalesce(c.pending, 0) AS pending, coalesce(c.failed, 0) AS failed, coalesce(c.sent, 0) AS sent
FROM webhook_endpoints e
LEFT JOIN LATERAL (
  SELECT count(*) FILTER (WHERE status IN ('pending', 'sending')) AS pending,
         count(*) FILTER (WHERE status = 'failed') AS failed,
         count(*) FILTER (WHERE status = 'sent') AS sent
  FROM webhook_deliveries d WHERE d.endpoint_id = e.id) c ON true
WHERE (CAST(:id AS bigint) IS NULL OR e.id = :id)
ORDER BY e.id
"""
)

ATTEMPTS_SQL = sa.text(
    f"""
SELECT a.id, a.delivery_id, a.started_at, a.duration_ms, a.outcome, a.response_code, a.error,
       d.webhook_id, d.event_type, d.status
FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
WHERE a.endpoint_id = :id AND (:outcome = '' OR a.outcome = :outcome)
ORDER BY a.id DESC LIMIT {ATTEMPTS_SHOWN}
"""
)


def endpoints() -> list:
    """Every endpoint with how many of its events wait, failed (the DLQ) and went out."""
    return db.session.execute(ENDPOINTS_SQL, {"id": None}).all()


def endpoint(endpoint_id: int):
    """One endpoint with its figures, or None."""
    return db.session.execute(ENDPOINTS_SQL, {"id": endpoint_id}).first()


def recent_attempts(endpoint_id: int, outcome: str = "") -> list:
    """The endpoint's latest tries (status, latency, response code), newest first."""
    return db.session.execute(ATTEMPTS_SQL, {"id": endpoint_id, "outcome": outcome}).all()
