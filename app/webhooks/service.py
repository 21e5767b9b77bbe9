"""Webhook writes: endpoints, the outbox (events inserted with the change), claims, outcomes, sweeps, replay.

Every function executes and flushes; none commits, except that outcomes are recorded on the send
ledger's autocommit connection, one statement per try (as app/delivery/service.py does for e-mail
and push). Emitting an event is one INSERT … SELECT in the caller's transaction: the event exists
exactly when the change does (an outbox), and its job is enqueued after the commit. No HTTP happens
in a request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import sqlalchemy as sa
from flask import current_app
from flask_babel import gettext

from app.audit import service as audit
from app.extensions import db
from app.providers.endpoints import EndpointRefused
from app.queueing import enqueue_deliveries_after_commit
from app.refusal import Refused
from app.webhooks import events, queries, signing, targets

QUEUE = "default"  # the product hears about changes soon, but never ahead of a high-priority notification
# Which event types have an enabled endpoint, per process, so a change nobody subscribed to costs no
# statement. A registration made in another process reaches this one within this many seconds.
SUBSCRIBED_CACHE_SECONDS = 2.0
_subscribed: tuple[float, frozenset[str]] = (0.0, frozenset())
_subscribed_lock = threading.Lock()

SUBSCRIBED_SQL = sa.text("SELECT DISTINCT unnest(event_types) FROM webhook_endpoints WHERE enabled")

EMIT_SQL = sa.text(
    """
INSERT INTO webhook_deliveries (endpoint_id, webhook_id, event_type, payload, occurred_at)
SELECT e.id, v.webhook_id, :event_type, v.payload, v.occurred_at
FROM unnest(CAST(:ids AS text[]), CAST(:payloads AS text[]), CAST(:ats AS timestamptz[]))
     AS v(webhook_id, payload, occurred_at)
CROSS JOIN webhook_endpoints e
WHERE e.enabled AND CASE WHEN CAST(:endpoint AS bigint) IS NULL THEN :event_type = ANY(e.event_types)
                         ELSE e.id = :endpoint END
RETURNING id
"""
)

CREATE_SQL = sa.text(
    """
INSERT INTO webhook_endpoints (url, description, event_types, enabled, secret_sealed, secret_hint)
VALUES (:url, :description, CAST(:event_types AS text[]), :enabled, '', :hint)
RETURNING id
"""
)
SEAL_SQL = sa.text("UPDATE webhook_endpoints SET secret_sealed = :sealed WHERE id = :id")

UPDATE_SQL = sa.text(
    """
UPDATE webhook_endpoints SET event_types = CAST(:event_types AS text[]), enabled = :enabled, updated_at = now()
WHERE id = :id RETURNING id
"""
)

DELETE_SQL = sa.text("DELETE FROM webhook_endpoints WHERE id = :id RETURNING url")

CLAIM_SQL = sa.text(
    """
UPDATE webhook_deliveries
SET status = 'sending', locked_until = now() + make_interval(secs => :lease), updated_at = now()
WHERE id IN (SELECT id FROM webhook_deliveries
             WHERE id = ANY(CAST(:ids AS bigint[])) AND status = 'pending' AND next_attempt_at <= now()
             ORDER BY id FOR UPDATE SKIP LOCKED)
RETURNING id, locked_until
"""
)

BATCH_SQL = sa.text(
    """
SELECT d.id, d.endpoint_id, d.webhook_id, d.payload, d.attempts, e.url, e.secret_sealed, e.enabled
FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE d.id = ANY(CAST(:ids AS bigint[])) AND d.status = 'sending'
ORDER BY d.id
"""
)

# The lease doubles as the fencing token (see app/delivery/service.py RECORD_SQL).
# Many tries in one statement: the send loop records in small groups (see engine.py RECORD_EVERY).
RECORD_MANY_SQL = sa.text(
    """
WITH v AS (
  SELECT * FROM unnest(CAST(:ids AS bigint[]), CAST(:statuses AS text[]), CAST(:delays AS float8[]),
                       CAST(:errors AS text[]), CAST(:kinds AS text[]), CAST(:codes AS int[]),
                       CAST(:starts AS timestamptz[]), CAST(:durations AS int[]), CAST(:outcomes AS text[]))
    AS v(id, status, delay, error, kind, code, started_at, duration_ms, outcome)),
d AS (
  UPDATE webhook_deliveries w
  SET status = v.status, attempts = w.attempts + 1, locked_until = NULL, updated_at = now(), held_since = NULL,
      sent_at = CASE WHEN v.status = 'sent' THEN now() ELSE w.sent_at END,
      next_attempt_at = CASE WHEN v.status = 'pending' THEN now() + make_interval(secs => v.delay)
                             ELSE w.next_attempt_at END,
      last_error = v.error, error_kind = v.kind, response_code = v.code
  FROM v WHERE w.id = v.id AND w.status = 'sending' AND w.locked_until = :lease
  RETURNING w.id, w.endpoint_id, v.started_at, v.duration_ms, v.outcome, v.code, v.error)
INSERT INTO webhook_attempts (delivery_id, endpoint_id, started_at, duration_ms, outcome, response_code, error)
SELECT id, endpoint_id, started_at, duration_ms, outcome, code, error FROM d
"""
)

# Held back (open breaker, disabled endpoint, paused channel) without a try; held_since keeps when that began.
POSTPONE_SQL = sa.text(
    """
UPDATE webhook_deliveries w
SET status = 'pending', next_attempt_at = GREATEST(v.until, now() + interval '10 milliseconds'),
    locked_until = NULL, updated_at = now(), held_since = COALESCE(w.held_since, now())
FROM unnest(CAST(:ids AS bigint[]), CAST(:untils AS timestamptz[])) AS v(id, until)
WHERE w.id = v.id AND w.status = 'sending' AND w.locked_until = :lease
"""
)

RELEASE_SQL = sa.text(
    """
UPDATE webhook_deliveries
SET status = 'pending', locked_until = NULL, updated_at = now(), next_attempt_at = now() + interval '1 second'
WHERE id = ANY(CAST(:ids AS bigint[])) AND status = 'sending' AND locked_until = :lease
"""
)

EXPIRED_LEASES_SQL = sa.text(
    """
WITH d AS (
  UPDATE webhook_deliveries
  SET status = CASE WHEN attempts + 1 >= :max_attempts THEN 'failed' ELSE 'pending' END,
      error_kind = CASE WHEN attempts + 1 >= :max_attempts THEN 'lease_expired' ELSE error_kind END,
      attempts = attempts + 1, locked_until = NULL, updated_at = now(),
      next_attempt_at = now() + interval '1 second',
      last_error = 'lease expired: the worker stopped before recording a result'
  WHERE id IN (SELECT id FROM webhook_deliveries WHERE status = 'sending' AND locked_until < now()
               ORDER BY locked_until LIMIT :limit FOR UPDATE SKIP LOCKED)
  RETURNING id, endpoint_id, last_error)
INSERT INTO webhook_attempts (delivery_id, endpoint_id, duration_ms, outcome, error)
SELECT id, endpoint_id, 0, 'transient', last_error FROM d
RETURNING delivery_id
"""
)

EXPIRE_HELD_SQL = sa.text(
    """
WITH d AS (
  UPDATE webhook_deliveries
  SET status = 'failed', error_kind = 'expired', locked_until = NULL, updated_at = now(),
      last_error = 'expired: held back (open breaker or disabled endpoint) longer than DELIVERY_MAX_AGE'
  WHERE id IN (SELECT id FROM webhook_deliveries
               WHERE status = 'pending' AND held_since IS NOT NULL
                 AND held_since < now() - make_interval(secs => :max_age)
               ORDER BY held_since LIMIT :limit FOR UPDATE SKIP LOCKED)
  RETURNING id, endpoint_id, last_error)
INSERT INTO webhook_attempts (delivery_id, endpoint_id, duration_ms, outcome, error)
SELECT id, endpoint_id, 0, 'held', last_error FROM d
RETURNING delivery_id
"""
)

# As the ledger's TAKE_DUE_SQL: a due row nobody touched since it fell due, or untouched for :stale seconds.
TAKE_DUE_SQL = sa.text(
    """
WITH due AS (
  SELECT id FROM webhook_deliveries
  WHERE status = 'pending' AND next_attempt_at <= now()
    AND (updated_at < next_attempt_at OR updated_at < now() - make_interval(secs => :stale))
  ORDER BY next_attempt_at LIMIT :limit FOR UPDATE SKIP LOCKED)
UPDATE webhook_deliveries d SET updated_at = now() FROM due WHERE d.id = due.id
RETURNING d.id
"""
)

# Replay keeps each row's webhook_id: a receiver that did get it after all drops the copy.
REPLAY_SQL = sa.text(
    """
UPDATE webhook_deliveries
SET status = 'pending', attempts = 0, next_attempt_at = now(), updated_at = now(), held_since = NULL,
    last_error = NULL, error_kind = NULL
WHERE id IN (SELECT id FROM webhook_deliveries WHERE endpoint_id = :endpoint AND status = 'failed'
             ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED)
RETURNING id
"""
)


DELIVERY_EVENTS = frozenset({"delivery.sent", "delivery.failed"})


def outbox_sql(events_select: str) -> str:
    """A statement tail that queues events (a SELECT of event type, data json) from the CTEs before it.

    For changes made by a single SQL statement outside the session (the send ledger): the events are
    written by the same statement as the change. Ends the statement with the new rows' ids.
    """
    return f""", ev(event_type, data) AS ({events_select}),
outbox AS (
  INSERT INTO webhook_deliveries (endpoint_id, webhook_id, event_type, payload, occurred_at)
  SELECT e.id, 'msg_' || replace(CAST(gen_random_uuid() AS text), '-', ''), ev.event_type,
         CAST(json_build_object('data', ev.data, 'timestamp',
                                to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                                'type', ev.event_type) AS text), now()
  FROM ev JOIN webhook_endpoints e ON e.enabled AND ev.event_type = ANY(e.event_types)
  RETURNING id)
SELECT id FROM outbox
"""


def subscribed_types(conn=None) -> frozenset[str]:
    """Event types some enabled endpoint wants (cached per process for SUBSCRIBED_CACHE_SECONDS).

    Read on conn when given (the send ledger's autocommit connection), else in the session's transaction.
    """
    global _subscribed
    at, types = _subscribed
    if time.monotonic() - at < SUBSCRIBED_CACHE_SECONDS:
        return types
    types = frozenset((conn or db.session).execute(SUBSCRIBED_SQL).scalars())
    with _subscribed_lock:
        _subscribed = (time.monotonic(), types)
    return types


def forget_subscriptions() -> None:
    """Drop the cache: this process sees an endpoint change at once."""
    global _subscribed
    with _subscribed_lock:
        _subscribed = (0.0, frozenset())


def emit(event_type: str, data: dict) -> int:
    """Queue one event to every enabled endpoint that wants it, in the caller's transaction; return the rows."""
    return emit_many(event_type, [data])


def emit_many(event_type: str, items: Iterable[dict], endpoint_id: int | None = None) -> int:
    """Queue one event per item (one statement); their jobs follow the commit. Return the rows inserted."""
    if event_type not in events.EVENT_TYPES and event_type != events.TEST_EVENT:
        raise ValueError(f"unknown webhook event {event_type!r}")
    if endpoint_id is None and event_type not in subscribed_types():
        return 0
    ids, bodies, ats = [], [], []
    for data in _with_external_ids(list(items)):
        body, at = events.payload(event_type, data)
        ids.append(events.new_webhook_id())
        bodies.append(body)
        ats.append(at)
    if not ids:
        return 0
    params = {"event_type": event_type, "ids": ids, "payloads": bodies, "ats": ats, "endpoint": endpoint_id}
    rows = list(db.session.execute(EMIT_SQL, params).scalars())
    enqueue_deliveries_after_commit(QUEUE, events.CHANNEL, rows)
    return len(rows)


def _with_external_ids(items: list[dict]) -> list[dict]:
    """Add "user" (the product's external id) to every item naming a user_id (one statement for them all)."""
    user_ids = sorted({item["user_id"] for item in items if item.get("user_id") is not None})
    if not user_ids:
        return items
    external = dict(db.session.execute(queries.EXTERNAL_IDS_SQL, {"ids": user_ids}).all())
    return [{**item, "user": external.get(item["user_id"])} if item.get("user_id") is not None else item
            for item in items]  # fmt: skip


def _event_types(chosen: Iterable[str]) -> list[str]:
    types = sorted({t for t in chosen if t in events.EVENT_TYPES})
    if not types:
        raise Refused(gettext("Choose at least one event type."))
    return types


@dataclass(frozen=True)
class CreatedEndpoint:
    """A new endpoint and its signing secret (this is the only time the secret is shown)."""

    id: int
    secret: str


def create_endpoint(actor, url: str, event_types: Iterable[str], description: str = "", enabled: bool = True,
                    config: Mapping | None = None) -> CreatedEndpoint:  # fmt: skip
    """Register an endpoint (its URL passes the SSRF rules); return it with its new secret."""
    config = config or current_app.config
    url = (url or "").strip()
    if not url or len(url) > 2000:
        raise Refused(gettext("Enter the endpoint's URL (at most 2,000 characters)."))
    try:
        targets.check_url(url, config)
    except EndpointRefused as exc:
        raise Refused(str(exc)) from exc
    types = _event_types(event_types)
    secret = signing.new_secret()
    params = {"url": url, "description": (description or "").strip()[:200], "event_types": types,
              "enabled": enabled, "hint": secret[-4:]}  # fmt: skip
    endpoint_id = db.session.execute(CREATE_SQL, params).scalar_one()
    sealed = signing.seal(secret, endpoint_id, config["SECRET_KEY"])
    db.session.execute(SEAL_SQL, {"id": endpoint_id, "sealed": sealed})
    audit.record(actor, "webhook.create", "webhook_endpoint", endpoint_id,
                 after={"url": url, "event_types": types, "enabled": enabled})  # fmt: skip
    forget_subscriptions()
    return CreatedEndpoint(endpoint_id, secret)


def update_endpoint(actor, endpoint_id: int, event_types: Iterable[str], enabled: bool) -> bool:
    """Change what an endpoint receives and whether it is on; False when it does not exist."""
    types = _event_types(event_types)
    done = db.session.execute(UPDATE_SQL, {"id": endpoint_id, "event_types": types, "enabled": enabled}).first()
    if done:
        audit.record(actor, "webhook.update", "webhook_endpoint", endpoint_id,
                     after={"event_types": types, "enabled": enabled})  # fmt: skip
    forget_subscriptions()
    return done is not None


def delete_endpoint(actor, endpoint_id: int) -> bool:
    """Remove an endpoint with its queued events and history; False when it does not exist."""
    url = db.session.execute(DELETE_SQL, {"id": endpoint_id}).scalar()
    if url is not None:
        audit.record(actor, "webhook.delete", "webhook_endpoint", endpoint_id, before={"url": url})
    forget_subscriptions()
    return url is not None


def send_test(endpoint_id: int) -> int:
    """Queue a webhook.test event to this one endpoint if it is enabled; return 1, or 0 when it is not."""
    return emit_many(events.TEST_EVENT, [{"endpoint_id": endpoint_id}], endpoint_id=endpoint_id)


def replay_failed(endpoint_id: int, limit: int = 10_000) -> int:
    """Put the endpoint's failed deliveries (the DLQ) back to pending with their webhook ids; return how many."""
    ids = list(db.session.execute(REPLAY_SQL, {"endpoint": endpoint_id, "limit": limit}).scalars())
    enqueue_deliveries_after_commit(QUEUE, events.CHANNEL, ids)
    return len(ids)


def claim(ids: list[int], lease_seconds: float) -> tuple[list[int], datetime] | None:
    """Mark due pending rows of ids as sending under a lease (SKIP LOCKED): (their ids, the lease), or None."""
    rows = db.session.execute(CLAIM_SQL, {"ids": ids, "lease": lease_seconds}).all()
    if not rows:
        return None
    return sorted(r.id for r in rows), rows[0].locked_until


class OutboxEvent(NamedTuple):
    """One claimed event with its endpoint's URL, sealed secret and switch."""

    id: int
    endpoint_id: int
    webhook_id: str
    payload: str
    attempts: int
    url: str
    secret_sealed: str
    enabled: bool


def claimed_batch(ids: list[int]) -> list[OutboxEvent]:
    """The claimed events (plain tuples: the send loop reads each one's fields a dozen times, and every field
    read on a result row costs an AttributeError raised and caught inside SQLAlchemy's row class)."""
    return [OutboxEvent(**row._mapping) for row in db.session.execute(BATCH_SQL, {"ids": ids})]


def record_many(conn, tries: list, lease: datetime) -> None:
    """Write a group of tries (app/delivery/source.py Try) on conn in one statement (each row fenced by the lease)."""
    if not tries:
        return
    results = [t.result for t in tries]
    conn.execute(RECORD_MANY_SQL, {
        "lease": lease, "ids": [r.row.id for r in results], "statuses": [t.status for t in tries],
        "delays": [t.delay for t in tries], "errors": [r.error for r in results],
        "kinds": [t.error_kind for t in tries], "codes": [r.response_code for r in results],
        "starts": [r.started_at for r in results], "durations": [r.duration_ms for r in results],
        "outcomes": [r.outcome for r in results],
    })  # fmt: skip


def postpone(conn, waits: list[tuple[int, datetime]], lease: datetime) -> None:
    """Return claimed rows to pending until their times without a try (on conn, or the session)."""
    if waits:
        ids, untils = zip(*waits, strict=True)
        conn.execute(POSTPONE_SQL, {"ids": list(ids), "untils": list(untils), "lease": lease})


def release(conn, ids: list[int], lease: datetime) -> None:
    """Return claimed rows we did not get to (the lease runs out) to pending, no try counted."""
    if ids:
        conn.execute(RELEASE_SQL, {"ids": ids, "lease": lease})


def sweep(config: Mapping) -> dict[str, int]:
    """The sweeper's webhook step: expired leases, rows held too long, and due rows nobody enqueued."""
    limit = config["SWEEP_LIMIT"]
    leases = {"limit": limit, "max_attempts": config["RETRY_MAX_ATTEMPTS"]}
    released = len(db.session.execute(EXPIRED_LEASES_SQL, leases).all())
    expired = len(db.session.execute(EXPIRE_HELD_SQL, {"max_age": config["DELIVERY_MAX_AGE"], "limit": limit}).all())
    due = list(db.session.execute(TAKE_DUE_SQL, {"stale": config["SWEEP_REQUEUE_AFTER_SECONDS"], "limit": limit})
               .scalars())  # fmt: skip
    enqueue_deliveries_after_commit(QUEUE, events.CHANNEL, sorted(due))
    return {"webhooks_released": released, "webhooks_expired": expired, "webhooks_due": len(due)}
