"""Delivery writes: claim a batch, record outcomes, sweeper maintenance, one-click unsubscribe.

Every function executes and flushes; none commits (the one exception is explicit: the send loop's
records on send_ledger's autocommit connection commit themselves, see there). Statements are set-based
where the set is known up front (claim, skips, deferrals, sweeps); a send outcome is one statement per
row because each row must be durable on its own right after its send (see send_ledger and engine.py).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from flask import current_app

from app.delivery.queries import DIGEST_TARGET, digest_types, unsubscribe_info
from app.delivery.source import Claim, Try
from app.extensions import db
from app.queueing import DELIVERY_QUEUE_SQL, enqueue_deliveries, enqueue_deliveries_after_commit
from app.webhooks import service as webhooks

CLAIM_SQL = sa.text(
    """
UPDATE notification_deliveries
SET status = 'sending', locked_until = now() + make_interval(secs => :lease), updated_at = now()
WHERE id IN (SELECT id FROM notification_deliveries
             WHERE id = ANY(CAST(:ids AS bigint[])) AND channel = :channel
               AND status = 'pending' AND next_attempt_at <= now()
             FOR UPDATE SKIP LOCKED)
RETURNING id, locked_until
"""
)

# The lease value doubles as a fencing token: a row whose lease expired and was claimed again by
# another worker no longer matches, so a late writer changes nothing.
RECORD_SQL = sa.text(
    """
WITH d AS (
  UPDATE notification_deliveries
  SET status = :status, attempts = attempts + 1, locked_until = NULL, updated_at = now(),
      sent_at = CASE WHEN :status = 'sent' THEN now() ELSE sent_at END,
      next_attempt_at = CASE WHEN :status = 'pending' THEN now() + make_interval(secs => :delay)
                             ELSE next_attempt_at END,
      provider = :provider, provider_message_id = COALESCE(:message_id, provider_message_id), held_since = NULL,
      last_error = :error, error_kind = :error_kind,
      rendered_subject = COALESCE(:subject, rendered_subject), rendered_body = COALESCE(:body, rendered_body),
      reached = CASE WHEN :status = 'pending' AND :outcome = 'sent'
                     THEN coalesce(reached, '{}') || CAST(:reached AS text[]) ELSE reached END
  WHERE id = :id AND status = 'sending' AND locked_until = :lease
  RETURNING id, user_id)
INSERT INTO delivery_attempts (delivery_id, user_id, provider, started_at, duration_ms, outcome, error)
SELECT id, user_id, :provider, :started_at, :duration_ms, :outcome, :error FROM d
"""
)

# RECORD_SQL that also puts delivery.sent / delivery.failed into the webhook outbox in the same statement,
# used only while some endpoint wants them (the record stays one atomic statement on the send ledger).
RECORD_EMIT_SQL = sa.text(
    RECORD_SQL.text.replace(
        "  RETURNING id, user_id)\n",
        "  RETURNING id, user_id, notification_id, channel, status, attempts, provider, error_kind),\na AS (\n",
        1,
    )
    + ")\n"
    + webhooks.outbox_sql(
        """SELECT CASE d.status WHEN 'sent' THEN 'delivery.sent' ELSE 'delivery.failed' END,
       json_build_object('delivery_id', d.id, 'notification_id', d.notification_id, 'user_id', n.user_id,
                         'user', u.external_id, 'channel', d.channel, 'status', d.status, 'provider', d.provider,
                         'attempts', d.attempts, 'error_kind', d.error_kind)
FROM d JOIN notifications n ON n.id = d.notification_id JOIN users u ON u.id = n.user_id
WHERE d.status IN ('sent', 'failed')"""
    )
)

SKIP_SQL = sa.text(
    """
UPDATE notification_deliveries d
SET status = 'skipped', skip_reason = v.reason, locked_until = NULL, updated_at = now()
FROM unnest(CAST(:ids AS bigint[]), CAST(:reasons AS text[])) AS v(id, reason)
WHERE d.id = v.id AND d.status = 'sending' AND d.locked_until = :lease
"""
)

# A push row that reached some targets and whose others are gone since: sent as it stands, without a try.
DONE_SQL = sa.text(
    """
UPDATE notification_deliveries SET status = 'sent', sent_at = now(), locked_until = NULL, updated_at = now()
WHERE id = ANY(CAST(:ids AS bigint[])) AND status = 'sending' AND locked_until = :lease
"""
)

# Deferral does not burn an attempt; the 'deferred' attempt row says why the row waited.
DEFER_SQL = sa.text(
    """
WITH d AS (
  UPDATE notification_deliveries d
  SET status = 'pending', next_attempt_at = v.until, locked_until = NULL, updated_at = now(), held_since = NULL
  FROM unnest(CAST(:ids AS bigint[]), CAST(:untils AS timestamptz[])) AS v(id, until)
  WHERE d.id = v.id AND d.status = 'sending' AND d.locked_until = :lease
  RETURNING d.id, d.user_id, v.until)
INSERT INTO delivery_attempts (delivery_id, user_id, provider, duration_ms, outcome, error)
SELECT id, user_id, :provider, 0, 'deferred',
       'quiet hours until ' || to_char(until AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"')
FROM d
"""
)

# Rows we claimed but did not get to (the lease was running out) go back without losing a try;
# next_attempt_at one second ahead makes them "due after their last touch", so the sweeper takes them.
RELEASE_SQL = sa.text(
    """
UPDATE notification_deliveries
SET status = 'pending', locked_until = NULL, updated_at = now(), next_attempt_at = now() + interval '1 second'
WHERE id = ANY(CAST(:ids AS bigint[])) AND status = 'sending' AND locked_until = :lease
"""
)

# A lease expiry counts as a try: a message that kills its worker every time (a poison message)
# would otherwise come back forever. When that try was the last, the row goes to the DLQ.
EXPIRED_LEASES_SQL = sa.text(
    """
WITH d AS (
  UPDATE notification_deliveries
  SET status = CASE WHEN attempts + 1 >= :max_attempts THEN 'failed' ELSE 'pending' END,
      error_kind = CASE WHEN attempts + 1 >= :max_attempts THEN 'lease_expired' ELSE error_kind END,
      attempts = attempts + 1, locked_until = NULL, updated_at = now(),
      next_attempt_at = now() + interval '1 second',
      last_error = 'lease expired: the worker stopped before recording a result'
  WHERE id IN (SELECT id FROM notification_deliveries
               WHERE status = 'sending' AND locked_until < now()
               ORDER BY locked_until LIMIT :limit FOR UPDATE SKIP LOCKED)
  RETURNING id, user_id, COALESCE(provider, channel) AS provider, last_error)
INSERT INTO delivery_attempts (delivery_id, user_id, provider, duration_ms, outcome, error)
SELECT id, user_id, provider, 0, 'transient', last_error FROM d
RETURNING delivery_id
"""
)

# Rows that must wait for a provider (every breaker open, or its bucket empty) go back to pending
# for that long without counting a try. Always ahead of now(): the sweeper takes a row only when
# it is due after its last touch (see TAKE_DUE_SQL). held_since keeps when the holding began (a try
# clears it), so a row held longer than DELIVERY_MAX_AGE goes to the DLQ (EXPIRE_HELD_SQL).
POSTPONE_SQL = sa.text(
    """
UPDATE notification_deliveries d
SET status = 'pending', next_attempt_at = GREATEST(v.until, now() + interval '10 milliseconds'),
    locked_until = NULL, updated_at = now(), held_since = COALESCE(d.held_since, now())
FROM unnest(CAST(:ids AS bigint[]), CAST(:untils AS timestamptz[])) AS v(id, until)
WHERE d.id = v.id AND d.status = 'sending' AND d.locked_until = :lease
"""
)

# Held back (see POSTPONE_SQL) longer than DELIVERY_MAX_AGE: to the DLQ as `expired`, with an attempt row
# that says so (no provider was called). Bounded and SKIP LOCKED, so sweepers side by side never
# take a row twice, and only still-pending rows match, so a second pass changes nothing.
EXPIRE_HELD_SQL = sa.text(
    """
WITH d AS (
  UPDATE notification_deliveries
  SET status = 'failed', error_kind = 'expired', locked_until = NULL, updated_at = now(),
      last_error = 'expired: held back (open breaker, empty rate-limit bucket or paused push service) since '
                   || to_char(held_since AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"')
                   || ', longer than DELIVERY_MAX_AGE'
  WHERE id IN (SELECT id FROM notification_deliveries
               WHERE status = 'pending' AND held_since IS NOT NULL
                 AND held_since < now() - make_interval(secs => :max_age)
               ORDER BY held_since LIMIT :limit FOR UPDATE SKIP LOCKED)
  RETURNING id, user_id, COALESCE(provider, channel) AS provider, last_error)
INSERT INTO delivery_attempts (delivery_id, user_id, provider, duration_ms, outcome, error)
SELECT id, user_id, provider, 0, 'expired', last_error FROM d
RETURNING delivery_id
"""
)

# Frequency caps. The locks are taken one key after another in sorted order (two workers never wait on
# each other in a cycle) and held until the transaction ends, so counting the window and claiming a slot
# is one step for everyone else capping the same (user, type, channel).
CAP_LOCK_SQL = sa.text(
    "SELECT count(pg_advisory_xact_lock(hashtextextended('hato-cap:' || k, 0))) FROM unnest(CAST(:keys AS text[])) k"
)

# A row already admitted (a retry, or a lease that expired after admission) keeps its slot.
CAP_ADMITTED_SQL = sa.text("SELECT delivery_id FROM delivery_cap_uses WHERE delivery_id = ANY(CAST(:ids AS bigint[]))")

CAP_ADMIT_SQL = sa.text(
    """
WITH r AS (
  SELECT v.*, row_number() OVER (PARTITION BY v.user_id, v.type, v.channel ORDER BY v.id) AS n
  FROM unnest(CAST(:ids AS bigint[]), CAST(:users AS bigint[]), CAST(:types AS text[]), CAST(:channels AS text[]),
              CAST(:caps AS int[]), CAST(:windows AS int[])) AS v(id, user_id, type, channel, cap, win)
  WHERE v.id <> ALL(CAST(:admitted AS bigint[])))
INSERT INTO delivery_cap_uses (delivery_id, user_id, type, channel)
SELECT r.id, r.user_id, r.type, r.channel FROM r
WHERE r.n + (SELECT count(*) FROM delivery_cap_uses u
             WHERE u.user_id = r.user_id AND u.type = r.type AND u.channel = r.channel
               AND u.used_at > now() - make_interval(secs => r.win)) <= r.cap
RETURNING delivery_id
"""
)

PRUNE_IDEMPOTENCY_SQL = sa.text(
    """
DELETE FROM idempotency_keys
WHERE id IN (SELECT id FROM idempotency_keys WHERE created_at < now() - interval '24 hours' LIMIT :limit)
"""
)

EMAIL_OFF_SQL = sa.text(
    """
INSERT INTO notification_preferences (user_id, type, channel, enabled)
VALUES (:user_id, :type, 'email', false)
ON CONFLICT (user_id, type, channel) DO UPDATE SET enabled = false
"""
)


def claim(channel: str, ids: list[int], lease_seconds: float) -> Claim | None:
    """Mark due pending rows of ids as sending under a lease (SKIP LOCKED); None if none were free."""
    rows = db.session.execute(CLAIM_SQL, {"ids": ids, "channel": channel, "lease": lease_seconds}).all()
    if not rows:
        return None
    return Claim(ids=sorted(r.id for r in rows), lease=rows[0].locked_until)


def record_skips(skips: list[tuple[int, str]], lease: datetime) -> None:
    """Mark rows skipped with their reasons (one statement)."""
    if skips:
        ids, reasons = zip(*skips, strict=True)
        db.session.execute(SKIP_SQL, {"ids": list(ids), "reasons": list(reasons), "lease": lease})


def record_done(ids: list[int], lease: datetime) -> None:
    """Mark sent the rows whose targets that are left all went away after an earlier try reached the others."""
    if ids:
        db.session.execute(DONE_SQL, {"ids": ids, "lease": lease})


def record_deferrals(deferrals: list[tuple[int, datetime]], lease: datetime, provider: str) -> None:
    """Put rows back to pending until their quiet hours end, without burning an attempt."""
    if deferrals:
        ids, untils = zip(*deferrals, strict=True)
        db.session.execute(DEFER_SQL, {"ids": list(ids), "untils": list(untils), "lease": lease, "provider": provider})


def record_result(attempt: Try, lease: datetime, conn) -> str:
    """Write one try on conn (the send ledger): the attempt row and the row's new state; return the state."""
    result = attempt.result
    emitting = bool(webhooks.DELIVERY_EVENTS & webhooks.subscribed_types(conn))
    found = conn.execute(
        RECORD_EMIT_SQL if emitting else RECORD_SQL,
        {
            "id": result.row.id,
            "lease": lease,
            "status": attempt.status,
            "delay": attempt.delay,
            "provider": result.provider,
            "message_id": result.message_id,
            "error": result.error,
            "error_kind": attempt.error_kind,
            "subject": result.subject,
            "body": result.body,
            "started_at": result.started_at,
            "duration_ms": result.duration_ms,
            "outcome": result.outcome,
            "reached": list(result.reached),
        },
    )
    if emitting:  # the outbox rows are committed already (autocommit): their jobs go now
        enqueue_deliveries(webhooks.QUEUE, webhooks.events.CHANNEL, list(found.scalars()))
    return attempt.status


@contextmanager
def send_ledger():
    """Yield the connection a batch's send loop records on: one round trip per sent message.

    Each record is a single UPDATE + INSERT statement, atomic on its own, so it runs in autocommit on
    a connection held for the whole batch (no pool checkout, BEGIN, COMMIT or reset per message) and
    commits asynchronously (synchronous_commit off): a PostgreSQL crash can then forget the last
    fraction of a second of records, which leaves those rows `sending`; their lease expires and they
    are sent again. That is a duplicate, never a loss, because the claim itself was committed durably.
    With DELIVERY_LEDGER_SYNCHRONOUS the records commit as everything else does (waiting for a synchronous
    standby where there is one), so a failover re-sends at most the one message whose record was in flight.
    """
    asynchronous = not current_app.config["DELIVERY_LEDGER_SYNCHRONOUS"]
    with db.engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        if asynchronous:
            conn.execute(sa.text("SET synchronous_commit = off"))
        try:
            yield conn
        finally:
            if asynchronous:
                conn.execute(sa.text("RESET synchronous_commit"))


# The rows a "first" chain handed over to (the trigger of migration 0018 made them pending and due now), with
# the queue their notification's first row went on.
SUCCESSORS_SQL = sa.text(
    f"""
SELECT d.id, d.channel, {DELIVERY_QUEUE_SQL} AS queue
FROM notification_deliveries d
JOIN notifications n ON n.id = d.notification_id AND n.user_id = d.user_id
JOIN notification_types t ON t.type = n.type
WHERE d.notification_id = ANY(CAST(:notifications AS bigint[])) AND d.status = 'pending' AND d.route_rank > 0
  AND d.next_attempt_at <= now()
"""
)


def wake_successors(notification_ids: list[int], conn=None, *, after_commit: bool = False) -> int:
    """Enqueue the rows chains of these notifications handed over to: now (conn committed them), or after the
    session's commit. Return how many."""
    if not notification_ids:
        return 0
    groups: dict[tuple[str, str], list[int]] = {}
    for row in (conn or db.session).execute(SUCCESSORS_SQL, {"notifications": sorted(set(notification_ids))}):
        groups.setdefault((row.queue, row.channel), []).append(row.id)
    for (queue, channel), ids in groups.items():
        (enqueue_deliveries_after_commit if after_commit else enqueue_deliveries)(queue, channel, sorted(ids))
    return sum(len(ids) for ids in groups.values())


def release(ids: list[int], lease: datetime, conn=None) -> None:
    """Return claimed rows we did not try to pending (no attempt is counted), on conn (default: the session)."""
    if ids:
        (conn or db.session).execute(RELEASE_SQL, {"ids": ids, "lease": lease})


def release_expired_leases(limit: int, max_attempts: int) -> int:
    """Count a try for rows whose worker died (lease expired): pending again, or failed when it was the last."""
    return len(db.session.execute(EXPIRED_LEASES_SQL, {"limit": limit, "max_attempts": max_attempts}).all())


def postpone(waits: list[tuple[int, datetime]], lease: datetime, conn=None) -> None:
    """Return claimed rows to pending until the given times without counting a try (one statement), on conn
    (default: the session)."""
    if waits:
        ids, untils = zip(*waits, strict=True)
        (conn or db.session).execute(POSTPONE_SQL, {"ids": list(ids), "untils": list(untils), "lease": lease})


def expire_held(max_age_seconds: float, limit: int) -> int:
    """Move rows held back longer than max_age_seconds to the DLQ as `expired` (at most limit); return how many."""
    return len(db.session.execute(EXPIRE_HELD_SQL, {"max_age": max_age_seconds, "limit": limit}).all())


def admit_capped(groups: dict[tuple[int, str, str], list]) -> set[int]:
    """Take a cap slot for each row that still fits its (user, type, channel) window; return the admitted ids.

    Holds advisory locks until the caller's transaction ends: commit right after recording the skips.
    """
    if not groups:
        return set()
    rows = [row for key in sorted(groups) for row in groups[key]]
    ids = [row.id for row in rows]
    db.session.execute(CAP_LOCK_SQL, {"keys": [f"{u}:{t}:{c}" for u, t, c in sorted(groups)]})
    admitted = set(db.session.execute(CAP_ADMITTED_SQL, {"ids": ids}).scalars())
    params = {
        "ids": ids,
        "users": [row.user_id for row in rows],
        "types": [row.type for row in rows],
        "channels": [row.channel for row in rows],
        "caps": [row.cap_count for row in rows],
        "windows": [row.cap_window for row in rows],
        "admitted": sorted(admitted),
    }
    return admitted | set(db.session.execute(CAP_ADMIT_SQL, params).scalars())


def prune_idempotency_keys(limit: int = 10000) -> int:
    """Delete idempotency keys older than 24 h (at most limit per call); return how many."""
    return db.session.execute(PRUNE_IDEMPOTENCY_SQL, {"limit": limit}).rowcount


@dataclass(frozen=True)
class UnsubscribeOutcome:
    """What a one-click unsubscribe did: done | mandatory | unknown."""

    status: str
    type_label: str = ""


def turn_off_email(user_id: int, type_: str) -> UnsubscribeOutcome:
    """Turn e-mail off for (user, type) unless the type is mandatory; idempotent."""
    info = unsubscribe_info(user_id, type_)
    if info is None:
        return UnsubscribeOutcome("unknown")
    if info.mandatory:
        return UnsubscribeOutcome("mandatory", info.label)
    # A digest's link stops that kind of digest: e-mail off for every type it carries.
    types = digest_types(user_id, type_.removeprefix(DIGEST_TARGET)) if type_.startswith(DIGEST_TARGET) else [type_]
    for each in types:
        db.session.execute(EMAIL_OFF_SQL, {"user_id": user_id, "type": each})
        if info.email_on:  # a second click changes nothing, so the product hears of it once
            webhooks.emit("user.unsubscribed", {"user_id": user_id, "type": each, "channel": "email"})
    return UnsubscribeOutcome("done", info.label)
