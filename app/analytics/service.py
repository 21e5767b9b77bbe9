"""Folding the change queue into the rollups: one set-based statement per batch, exactly once per change.

Each batch deletes its change rows (SKIP LOCKED: concurrent passes take disjoint rows) and adds their
signed contributions to the hour and day rows in the same statement, so a change is in the rollups exactly
when it is gone from the queue; a pass that fails rolls both back. Rollup rows are upserted in key order so
two passes adding to the same rows wait for each other instead of deadlocking.
"""

from __future__ import annotations

import sqlalchemy as sa

from app.analytics.histogram import BUCKETS, FACTS
from app.extensions import db

DIMENSIONS = "type, channel, provider, tenant_id, skip_reason"
_counts = ",\n         ".join(f"sum(sign * (facts & {bit} > 0)::int) AS {name}" for name, bit in FACTS.items())
_hist = ", ".join(f"coalesce(sum(sign) FILTER (WHERE {{col}} = {b}), 0)::int" for b in range(BUCKETS))
_add = ",\n  ".join(f"{name} = r.{name} + EXCLUDED.{name}" for name in FACTS)
_add_hist = ",\n  ".join(
    f"{col} = (SELECT array_agg(a + b ORDER BY i) FROM unnest(r.{col}, EXCLUDED.{col}) WITH ORDINALITY AS x(a, b, i))"
    for col in ("sent_hist", "delivered_hist")
)

ROLL_UP_SQL = sa.text(
    f"""
WITH taken AS (
  DELETE FROM delivery_rollup_changes c
  WHERE c.id IN (SELECT id FROM delivery_rollup_changes ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED)
  RETURNING c.*
), sides AS (
  SELECT date_trunc('hour', t.born, 'UTC') AS hour, coalesce(n.type, '') AS type, t.channel,
         coalesce(n.tenant_id, 0) AS tenant_id, s.*
  FROM taken t
  LEFT JOIN notifications n ON n.id = t.notification_id AND n.user_id = t.user_id
  CROSS JOIN LATERAL (VALUES (-1, t.o_provider, t.o_skip, t.o_facts, hato_rollup_bucket(t.o_sent_ms),
                              hato_rollup_bucket(t.o_deliv_ms)),
                             (1, t.n_provider, t.n_skip, t.n_facts, hato_rollup_bucket(t.n_sent_ms),
                              hato_rollup_bucket(t.n_deliv_ms)))
    AS s(sign, provider, skip_reason, facts, sent_b, deliv_b)
  WHERE s.facts <> 0
), folded AS (
  SELECT CASE WHEN GROUPING(hour) = 0 THEN 'hour' ELSE 'day' END AS grain,
         coalesce(hour, day) AS bucket_at,
         type, channel, provider, tenant_id, skip_reason,
         {_counts},
         ARRAY[{_hist.format(col="sent_b")}] AS sent_hist,
         ARRAY[{_hist.format(col="deliv_b")}] AS delivered_hist
  FROM (SELECT *, date_trunc('day', hour, 'UTC') AS day FROM sides) s
  GROUP BY GROUPING SETS ((hour, {DIMENSIONS}), (day, {DIMENSIONS}))
), upserted AS (
  INSERT INTO delivery_rollups AS r (grain, bucket, {DIMENSIONS}, {", ".join(FACTS)}, sent_hist, delivered_hist)
  SELECT grain, bucket_at, {DIMENSIONS}, {", ".join(FACTS)}, sent_hist, delivered_hist FROM folded
  ORDER BY grain, bucket_at, {DIMENSIONS}
  ON CONFLICT (grain, bucket, {DIMENSIONS}) DO UPDATE SET
  {_add},
  {_add_hist}
  RETURNING 1
)
SELECT (SELECT count(*) FROM taken) AS changes, (SELECT count(*) FROM upserted) AS rollup_rows
"""
)

OLDEST_SQL = sa.text("SELECT recorded_at FROM delivery_rollup_changes ORDER BY id LIMIT 1")


def roll_up(limit: int) -> int:
    """Fold up to limit of the oldest changes no other pass holds into the rollups; return how many (flushes only)."""
    return int(db.session.execute(ROLL_UP_SQL, {"limit": limit}).one().changes)


def oldest_waiting():
    """When the oldest change still waiting to be folded was recorded (None: the rollups are current)."""
    return db.session.execute(OLDEST_SQL).scalar()
