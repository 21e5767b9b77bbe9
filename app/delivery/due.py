"""The sweeper's due walk: stamp the pending ledger rows that fell due and nobody enqueued, and enqueue them.

A backlog larger than one pass (SWEEP_LIMIT) is taken a pass at a time from where the last full pass ended
(DueCursor); app/sweeper.py drains it within one tick, each pass's hand-off to Redis overlapping the next
pass's statement.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from app.extensions import db
from app.queueing import CAMPAIGN_QUEUE, DELIVERY_QUEUE_SQL, enqueue_deliveries_after_commit

# A due row is taken when nobody touched it since it fell due (a retry or a deferral coming up), or
# when nobody touched it for :stale seconds and its priority's queue is (nearly) empty: then its job
# was lost (Redis flushed, enqueue failed). With a backlog in Redis it is most likely still queued,
# and re-enqueuing it every :stale seconds would only multiply the backlog. Taking a row stamps
# updated_at, which is what stops a second sweeper, or the next pass, from enqueuing it again.
# The walk starts at :after (see DueCursor): rows stamped by earlier passes of a backlog are not walked
# (and their heap tuples not read) again by every later pass.
NO_JIT_SQL = sa.text("SELECT set_config('jit', 'off', true)")
TAKE_DUE_SQL = sa.text(
    f"""
WITH due AS (
  -- The due index alone, in order: the join that names a row's queue is made only for a row that was
  -- stamped long ago (the lost-job case), and for the rows taken (below), never for every candidate.
  SELECT d.ctid
  FROM notification_deliveries d
  WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND d.next_attempt_at >= CAST(:after AS timestamptz)
    AND (d.updated_at < d.next_attempt_at
         OR (d.updated_at < now() - make_interval(secs => :stale)
             AND (SELECT {DELIVERY_QUEUE_SQL} FROM notifications n JOIN notification_types t ON t.type = n.type
                  WHERE n.id = d.notification_id AND n.user_id = d.user_id) = ANY(CAST(:idle AS text[]))))
  ORDER BY d.next_attempt_at LIMIT :limit
  FOR UPDATE OF d SKIP LOCKED),
taken AS (
  -- By ctid: the rows are locked above, so their tuples stay put until the commit (a TID scan, no join).
  UPDATE notification_deliveries d
  SET updated_at = now()
  WHERE d.ctid = ANY(ARRAY(SELECT ctid FROM due))
  RETURNING d.id, d.user_id, d.notification_id, d.channel, d.next_attempt_at)
-- The queue the row's job went on first (DELIVERY_QUEUE_SQL: its type's priority, or low for a campaign row), named
-- once per group of (type, campaign or not, channel) rather than per row, each group's ids in order: reading 5,000
-- rows (and their timestamps) into Python cost a fifth of a pass, and a types lookup per row another tenth.
SELECT CASE WHEN g.campaign THEN '{CAMPAIGN_QUEUE}' ELSE t.priority END AS queue, g.channel, g.ids, g.last_due
FROM (SELECT n.type, n.campaign_id IS NOT NULL AS campaign, k.channel, array_agg(k.id ORDER BY k.id) AS ids,
             max(k.next_attempt_at) AS last_due
      FROM taken k
      JOIN notifications n ON n.id = k.notification_id AND n.user_id = k.user_id
      GROUP BY 1, 2, 3) g
JOIN notification_types t ON t.type = g.type
"""
)


@dataclass
class DueCursor:
    """Where the next pass's due walk starts: after the last row a full pass took, or from the start.

    A backlog larger than a pass is taken a pass at a time; without it, pass k would walk (and read the heap
    tuples of) the k-1 passes' rows stamped before it. A row that fell due behind the cursor (a postponed row
    committed late, a lost job going stale) is taken when the walk starts over: at the first pass that finds
    fewer rows than its limit, that is once the backlog ahead of it is taken.
    """

    after: datetime | None = None

    def moved(self, taken: int, limit: int, last: datetime | None) -> None:
        """Move past the rows a pass took, or back to the start when it found fewer than its limit."""
        self.after = last if taken >= limit else None


def take_due(
    stale_seconds: float, limit: int, idle_queues: list[str], cursor: DueCursor | None = None
) -> dict[tuple[str, str], list[int]]:
    """Stamp due pending rows nobody has enqueued; their jobs follow the commit. Return them by (queue, channel).

    A failed enqueue leaves the rows stamped; they come round again after the stale window. With a cursor the
    walk starts where the last full pass ended, and the cursor moves on.
    """
    after = cursor.after if cursor and cursor.after else "-infinity"
    params = {"stale": stale_seconds, "limit": limit, "idle": idle_queues, "after": after}
    # The planner's estimate for the due walk trips PostgreSQL's JIT, whose compile (~35 ms) costs more than the
    # statement's own work (a TID update of its rows); off for this transaction only (the sweeper's pass).
    db.session.execute(NO_JIT_SQL)
    rows = db.session.execute(TAKE_DUE_SQL, params).all()
    groups: dict[tuple[str, str], list[int]] = {}
    for row in rows:  # two types of one priority share a queue: their ids merge, in order
        ids = groups.get((row.queue, row.channel))
        groups[(row.queue, row.channel)] = sorted(ids + row.ids) if ids else row.ids
    if cursor is not None:
        taken = sum(len(ids) for ids in groups.values())
        cursor.moved(taken, limit, max((row.last_due for row in rows), default=None))
    for (queue, channel), ids in groups.items():
        enqueue_deliveries_after_commit(queue, channel, ids)
    return groups
