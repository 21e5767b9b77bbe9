"""The retention sweep's statements: one small keyset batch each, so a batch is one index range and short locks.

Walked tables (notifications, the delivery ledger) are read oldest first in (created_at, id) order from
a cursor: a batch looks at the next :limit index entries older than the window, deletes those the rules
allow (FOR UPDATE SKIP LOCKED: a row someone holds is left for the next walk) and returns where it
stopped. Rows the rules keep are stepped over, never looked at twice in one walk. Pruned sets (unmatched
provider events, an expired announcement's reads) are deleted whole, so they need no cursor.
"""

from __future__ import annotations

import sqlalchemy as sa

# A notification goes when it was read before :read_cutoff or created before :all_cutoff (unread and
# mandatory rows included), and never while one of its deliveries is pending, leased, in the DLQ or
# waiting for the user's digest: the cascade would take those with it. (read_at >= created_at, so the
# walk window is the later cutoff.)
NOTIFICATIONS_SQL = sa.text(
    """
WITH batch AS MATERIALIZED (
  SELECT id, created_at, read_at FROM notifications
  WHERE created_at < :window AND (created_at, id) > (:after_at, :after_id)
  ORDER BY created_at, id
  LIMIT :limit
), doomed AS (
  SELECT n.id FROM notifications n
  WHERE n.id = ANY (ARRAY (SELECT id FROM batch WHERE created_at < :all_cutoff OR read_at < :read_cutoff))
    AND (n.created_at < :all_cutoff OR n.read_at < :read_cutoff)
    AND NOT EXISTS (SELECT 1 FROM notification_deliveries d
                    WHERE d.notification_id = n.id
                      AND (d.status IN ('pending', 'sending', 'failed')
                           OR (d.skip_reason = 'digested' AND d.digest_id IS NULL)))
  FOR UPDATE OF n SKIP LOCKED
), gone AS (
  DELETE FROM notifications n WHERE n.id = ANY (ARRAY (SELECT id FROM doomed)) RETURNING n.id
), last AS (
  SELECT created_at, id FROM batch ORDER BY created_at DESC, id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM gone) AS deleted, (SELECT count(*) FROM batch) AS scanned,
       (SELECT created_at FROM last) AS last_at, (SELECT id FROM last) AS last_id
"""
)

# Sent and skipped deliveries go with their attempts, provider events and cap uses (ON DELETE CASCADE).
# Kept: pending (retries, escalations), sending (leased), failed (the DLQ, until an operator replays or
# discards it) and e-mail still waiting for the user's digest.
DELIVERIES_SQL = sa.text(
    """
WITH batch AS MATERIALIZED (
  SELECT id, created_at FROM notification_deliveries
  WHERE created_at < :window AND (created_at, id) > (:after_at, :after_id)
  ORDER BY created_at, id
  LIMIT :limit
), doomed AS (
  SELECT d.id FROM notification_deliveries d
  WHERE d.id = ANY (ARRAY (SELECT id FROM batch))
    AND d.status IN ('sent', 'skipped')
    AND NOT (d.skip_reason IS NOT DISTINCT FROM 'digested' AND d.digest_id IS NULL)
  FOR UPDATE OF d SKIP LOCKED
), gone AS (
  DELETE FROM notification_deliveries d WHERE d.id = ANY (ARRAY (SELECT id FROM doomed)) RETURNING d.id
), last AS (
  SELECT created_at, id FROM batch ORDER BY created_at DESC, id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM gone) AS deleted, (SELECT count(*) FROM batch) AS scanned,
       (SELECT created_at FROM last) AS last_at, (SELECT id FROM last) AS last_id
"""
)

# Provider events that matched no delivery (counted when they came, kept for the operator a while).
UNMATCHED_EVENTS_SQL = sa.text(
    """
WITH doomed AS (
  SELECT id FROM provider_events
  WHERE delivery_id IS NULL AND received_at < :cutoff
  ORDER BY received_at, id
  LIMIT :limit
  FOR UPDATE SKIP LOCKED
), gone AS (
  DELETE FROM provider_events e WHERE e.id = ANY (ARRAY (SELECT id FROM doomed)) RETURNING e.id
)
SELECT count(*) AS deleted FROM gone
"""
)

# Webhook events the product received (sent) go after RETENTION_LEDGER_DAYS with their attempts (ON DELETE
# CASCADE); pending, leased and failed ones (the endpoint's failed list, replayable) stay. The outbox's ids
# grow with time, so the oldest come first on the primary key and a batch stops after :limit of them.
WEBHOOK_EVENTS_SQL = sa.text(
    """
WITH doomed AS (
  SELECT id FROM webhook_deliveries
  WHERE status = 'sent' AND created_at < :cutoff
  ORDER BY id
  LIMIT :limit
  FOR UPDATE SKIP LOCKED
), gone AS (
  DELETE FROM webhook_deliveries w WHERE w.id = ANY (ARRAY (SELECT id FROM doomed)) RETURNING w.id
)
SELECT count(*) AS deleted FROM gone
"""
)

# The oldest announcement that expired before :cutoff and still has reads (announcements are few: the
# operator writes them by hand, so this reads the small table and probes the reads index once each).
EXPIRED_ANNOUNCEMENT_SQL = sa.text(
    """
SELECT a.id FROM announcements a
WHERE a.expires_at < :cutoff
  AND EXISTS (SELECT 1 FROM announcement_reads r WHERE r.announcement_id = a.id)
ORDER BY a.expires_at, a.id
LIMIT 1
"""
)

# An expired announcement is no longer shown nor counted by the badge, so its reads can go.
ANNOUNCEMENT_READS_SQL = sa.text(
    """
WITH doomed AS (
  SELECT announcement_id, user_id FROM announcement_reads
  WHERE announcement_id = :announcement_id
  ORDER BY announcement_id, user_id
  LIMIT :limit
  FOR UPDATE SKIP LOCKED
), gone AS (
  DELETE FROM announcement_reads r USING doomed
  WHERE r.announcement_id = doomed.announcement_id AND r.user_id = doomed.user_id
  RETURNING 1
)
SELECT count(*) AS deleted FROM gone
"""
)

WALKS = {"notifications": NOTIFICATIONS_SQL, "deliveries": DELIVERIES_SQL}

# A topic notification's fanout record, once done or failed, is the progress the API answered with
# (GET /v1/fanouts/<id>); its notifications carry the topic, not the fanout, so it goes with the ledger's age.
TOPIC_FANOUTS_SQL = sa.text(
    """
WITH doomed AS (
  SELECT id FROM topic_fanouts
  WHERE status <> 'running' AND coalesce(finished_at, created_at) < :cutoff
  ORDER BY id
  LIMIT :limit
  FOR UPDATE SKIP LOCKED
), gone AS (
  DELETE FROM topic_fanouts f WHERE f.id = ANY (ARRAY (SELECT id FROM doomed)) RETURNING f.id
)
SELECT count(*) AS deleted FROM gone
"""
)
