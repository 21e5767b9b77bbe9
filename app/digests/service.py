"""Digest writes: open runs for due (user, kind, period) and give them the waiting e-mails; claim and record.

Exactly once per (user, period): a run is unique on (user_id, kind, period_start), so two sweepers, or a
sweeper restarted mid-pass, insert it once (ON CONFLICT DO NOTHING); an e-mail waiting for a digest
(a ledger row skipped with reason 'digested') is taken by setting its digest_id in the statement that
opens the run, so it lands in exactly one run. A run is sent by a job that leases it like a ledger row;
a worker killed mid-send leaves the lease to expire and the sweeper enqueues the run again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from app.digests.queries import DEFAULT_DIGEST_TIME, frequency_sql
from app.extensions import db

# The start of the user's current period, as of :now. Hourly: the hour (in UTC, whatever the session's
# TimeZone). Daily: the latest digest_time (09:00 if unset) in the user's zone at or before :now; the
# local date arithmetic happens on wall-clock time and is converted back, so 09:00 stays 09:00 across
# daylight-saving changes.
PERIOD_SQL = f"""CASE g.kind
  WHEN 'hourly' THEN date_trunc('hour', CAST(:now AS timestamptz) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
  ELSE (CASE WHEN date_trunc('day', CAST(:now AS timestamptz) AT TIME ZONE z.tz)
                  + coalesce(u.digest_time, TIME '{DEFAULT_DIGEST_TIME:%H:%M}')
                  > CAST(:now AS timestamptz) AT TIME ZONE z.tz
             THEN date_trunc('day', CAST(:now AS timestamptz) AT TIME ZONE z.tz)
                  + coalesce(u.digest_time, TIME '{DEFAULT_DIGEST_TIME:%H:%M}') - interval '1 day'
             ELSE date_trunc('day', CAST(:now AS timestamptz) AT TIME ZONE z.tz)
                  + coalesce(u.digest_time, TIME '{DEFAULT_DIGEST_TIME:%H:%M}') END) AT TIME ZONE z.tz
  END"""

# One batch of waiting e-mails (keyset on notification_id over a partial index): group them by
# (user, kind), compute each group's period, open the runs that are due (an item older than the
# period's start) or join a run of that period still pending, and take the items for it. The
# e-mail of a type whose frequency is daily waits for the daily digest; every other one (hourly, or
# the excess of a frequency cap on an immediate type) for the next hourly one.
BUILD_SQL = sa.text(
    f"""
WITH waiting AS (
  SELECT d.id, d.notification_id, n.user_id, n.created_at,
         CASE WHEN {frequency_sql("n.user_id")} = 'daily' THEN 'daily' ELSE 'hourly' END AS kind
  FROM notification_deliveries d
  JOIN notifications n ON n.id = d.notification_id
  JOIN notification_types t ON t.type = n.type
  WHERE d.skip_reason = 'digested' AND d.digest_id IS NULL AND d.notification_id > :after
  ORDER BY d.notification_id
  LIMIT :limit
),
groups AS (
  SELECT g.user_id, g.kind, {PERIOD_SQL} AS period_start
  FROM (SELECT DISTINCT user_id, kind FROM waiting) g
  JOIN users u ON u.id = g.user_id
  CROSS JOIN LATERAL (SELECT coalesce(nullif(u.timezone, ''), CAST(:default_tz AS text)) AS tz) z
),
due AS (
  SELECT g.* FROM groups g
  WHERE EXISTS (SELECT 1 FROM waiting w
                WHERE w.user_id = g.user_id AND w.kind = g.kind AND w.created_at < g.period_start)
),
opened AS (
  INSERT INTO digest_runs (user_id, kind, period_start, ledger_id, next_attempt_at)
  SELECT user_id, kind, period_start, nextval(pg_get_serial_sequence('notification_deliveries', 'id')), now()
  FROM due
  ORDER BY user_id, kind
  ON CONFLICT (user_id, kind, period_start) DO NOTHING
  RETURNING id, user_id, kind, period_start
),
joined AS (
  -- A run of this period opened by an earlier batch and not yet being sent: the lock makes its
  -- job's claim wait until these items are in (a run already sending is left alone).
  SELECT r.id, r.user_id, r.kind, r.period_start
  FROM digest_runs r JOIN due USING (user_id, kind, period_start)
  WHERE r.status = 'pending'
  FOR UPDATE OF r
),
runs AS (SELECT * FROM opened UNION ALL SELECT * FROM joined),
taken AS (
  UPDATE notification_deliveries d SET digest_id = r.id, updated_at = now()
  FROM waiting w JOIN runs r ON r.user_id = w.user_id AND r.kind = w.kind
  WHERE d.id = w.id AND w.created_at < r.period_start AND d.digest_id IS NULL
  RETURNING d.id
)
SELECT (SELECT count(*) FROM waiting) AS seen,
       (SELECT max(notification_id) FROM waiting) AS last,
       (SELECT count(*) FROM opened) AS opened,
       (SELECT count(*) FROM taken) AS taken
"""
)


@dataclass(frozen=True)
class Built:
    """What one build batch did: waiting e-mails looked at, the last one's notification id, runs opened, items taken."""

    seen: int
    last: int | None
    opened: int
    taken: int


def build_batch(now: datetime, after: int, limit: int, default_tz: str) -> Built:
    """Open the due runs of one batch of waiting e-mails (notification_id > after) and take their items."""
    row = db.session.execute(BUILD_SQL, {"now": now, "after": after, "limit": limit, "default_tz": default_tz}).one()
    return Built(row.seen, row.last, row.opened, row.taken)


# Runs to hand to a job: pending and due, or sending with a lapsed lease (a killed worker). Taking one
# pushes next_attempt_at on, so the next pass does not enqueue it again while its job waits in Redis.
TAKE_DUE_SQL = sa.text(
    """
UPDATE digest_runs r SET next_attempt_at = now() + make_interval(secs => :requeue_after)
WHERE r.id IN (
  SELECT id FROM digest_runs
  WHERE status IN ('pending', 'sending') AND next_attempt_at <= now()
    AND (status = 'pending' OR locked_until < now())
  ORDER BY next_attempt_at, id
  LIMIT :limit
  FOR UPDATE SKIP LOCKED
)
RETURNING r.id
"""
)


def take_due(requeue_after: float, limit: int) -> list[int]:
    """Stamp and return the runs whose job should be enqueued now."""
    rows = db.session.execute(TAKE_DUE_SQL, {"requeue_after": requeue_after, "limit": limit})
    return sorted(row.id for row in rows)


CLAIM_SQL = sa.text(
    """
UPDATE digest_runs r
SET status = 'sending', locked_until = now() + make_interval(secs => :lease), attempts = r.attempts + 1
WHERE r.id IN (
  SELECT id FROM digest_runs
  WHERE id = ANY(CAST(:ids AS bigint[]))
    AND (status = 'pending' OR (status = 'sending' AND locked_until < now()))
  FOR UPDATE SKIP LOCKED
)
RETURNING r.id, r.locked_until
"""
)


def claim(ids: list[int], lease_seconds: float) -> tuple[list[int], datetime] | None:
    """Lease the runs of ids that are pending (or whose lease lapsed): (their ids, the lease), or None."""
    rows = db.session.execute(CLAIM_SQL, {"ids": sorted(set(ids)), "lease": lease_seconds}).all()
    if not rows:
        return None
    return sorted(row.id for row in rows), rows[0].locked_until


# Every outcome is recorded only while this worker still holds the lease it claimed with. A held run
# (held true: it waits without a try) keeps when its holding began; anything else clears it.
RECORD_SQL = sa.text(
    """
UPDATE digest_runs
SET status = :status, item_count = coalesce(CAST(:items AS int), item_count), error = :error, locked_until = NULL,
    sent_at = CASE WHEN :status = 'sent' THEN now() END,
    next_attempt_at = coalesce(CAST(:retry_at AS timestamptz), next_attempt_at),
    held_since = CASE WHEN :held THEN coalesce(held_since, now()) END
WHERE id = :id AND status = 'sending' AND locked_until = :lease
"""
)


def record(conn, run_id: int, lease: datetime, status: str, items: int | None = None, error: str | None = None,
           retry_at: datetime | None = None, held: bool = False) -> bool:  # fmt: skip
    """Record a run's outcome (sent | empty | skipped | failed, or pending again at retry_at, held or not) on conn
    (the send ledger's autocommit connection, app.delivery.service.send_ledger, or the session); False if the
    lease was lost."""
    params = {"id": run_id, "lease": lease, "status": status, "items": items, "error": error, "retry_at": retry_at,
              "held": held}  # fmt: skip
    return conn.execute(RECORD_SQL, params).rowcount == 1


# Held (a paused channel, an open breaker) longer than DELIVERY_MAX_AGE: failed as expired, like a ledger row.
EXPIRE_HELD_SQL = sa.text(
    """
UPDATE digest_runs
SET status = 'failed', locked_until = NULL,
    error = 'expired: held back (paused channel, open breaker or empty rate-limit bucket) since '
            || to_char(held_since AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"') || ', longer than DELIVERY_MAX_AGE'
WHERE id IN (SELECT id FROM digest_runs
             WHERE status = 'pending' AND held_since IS NOT NULL
               AND held_since < now() - make_interval(secs => :max_age)
             ORDER BY held_since LIMIT :limit FOR UPDATE SKIP LOCKED)
RETURNING id
"""
)


def expire_held(max_age_seconds: float, limit: int) -> int:
    """Fail runs held back longer than max_age_seconds (at most limit); return how many."""
    return len(db.session.execute(EXPIRE_HELD_SQL, {"max_age": max_age_seconds, "limit": limit}).all())
