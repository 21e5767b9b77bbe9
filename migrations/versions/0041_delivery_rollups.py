"""Delivery analytics (issue 33): the rollups per hour and per day, and the change queue that feeds them.

Triggers on the ledger (notification_deliveries) and on provider_events append one row to
delivery_rollup_changes for each change that moves a figure: a row written (accepted), its status, provider,
provider status or skip reason changed (the row's old and new contribution), a delivery's first open or click.
The sweeper takes those rows in sets (DELETE … SKIP LOCKED … RETURNING) and adds them to delivery_rollups
in the same transaction, so each change is counted exactly once, whatever the order in which the writers'
transactions commit (a cursor over ids or times could skip a change whose transaction committed late).
Triggers, not calls in each writer: every path that changes the ledger (the engine, skips, the DLQ's replay,
provider hooks, a hand-written UPDATE) is counted without its code knowing about analytics.

The hour and day of a figure are those of its ledger row's creation (the 202), so an open reported a day later
adds to the hour in which its delivery was accepted. Times are in milliseconds from the row's creation to the
provider's acceptance (sent_at) and to the provider's "delivered" (provider_status_at); the rollups keep them
as fixed log-bucket histograms (app/analytics/histogram.py: the bucket function here is its twin).

Revision ID: 0041_delivery_rollups
Revises: 0040_tenant_last_seen
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0041_delivery_rollups"
down_revision = "0040_tenant_last_seen"
branch_labels = None
depends_on = None

BUCKETS = 40  # app/analytics/histogram.py BUCKETS

# Facts, one bit each (app/analytics/histogram.py FACTS): accepted 1, sent 2, delivered 4, bounced 8,
# complained 16, failed 32, skipped 64, opened 128, clicked 256 (the last two from provider events only).
FUNCTIONS = """
CREATE FUNCTION hato_rollup_facts(status text, provider_status text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT 1
    | CASE WHEN status = 'sent' THEN 2 ELSE 0 END
    | CASE WHEN provider_status IN ('delivered', 'read', 'complained') THEN 4 ELSE 0 END
    | CASE WHEN provider_status IN ('bounced', 'undelivered', 'failed') THEN 8 ELSE 0 END
    | CASE WHEN provider_status = 'complained' THEN 16 ELSE 0 END
    | CASE WHEN status = 'failed' THEN 32 ELSE 0 END
    | CASE WHEN status IN ('skipped', 'passed') THEN 64 ELSE 0 END
$$;

CREATE FUNCTION hato_rollup_skip(status text, skip_reason text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN status = 'skipped' THEN coalesce(nullif(skip_reason, ''), 'unknown')
              WHEN status = 'passed' THEN 'passed_over' ELSE '' END
$$;

CREATE FUNCTION hato_rollup_ms(since timestamptz, reached timestamptz) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN reached IS NULL THEN NULL
              ELSE least(greatest(extract(epoch FROM reached - since) * 1000, 0), 2147483647)::integer END
$$;

-- The histogram bucket of a time in ms: 0 below 10 ms, then ×1.5 per bucket, the last one open-ended.
CREATE FUNCTION hato_rollup_bucket(ms integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN ms IS NULL THEN NULL WHEN ms < 10 THEN 0
              ELSE least(39, 1 + floor(ln(ms / 10.0) / ln(1.5))::integer) END
$$;

CREATE FUNCTION hato_rollup_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO delivery_rollup_changes (user_id, delivery_id, notification_id, born, channel,
                                       n_provider, n_skip, n_facts, n_sent_ms, n_deliv_ms)
  SELECT r.user_id, r.id, r.notification_id, r.created_at, r.channel,
         coalesce(r.provider, ''), hato_rollup_skip(r.status, r.skip_reason),
         hato_rollup_facts(r.status, r.provider_status),
         CASE WHEN r.status = 'sent' THEN hato_rollup_ms(r.created_at, r.sent_at) END,
         CASE WHEN hato_rollup_facts(r.status, r.provider_status) & 4 > 0
              THEN hato_rollup_ms(r.created_at, r.provider_status_at) END
  FROM new_rows r;
  RETURN NULL;
END
$$;

CREATE FUNCTION hato_rollup_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  o_facts integer := hato_rollup_facts(OLD.status, OLD.provider_status);
  n_facts integer := hato_rollup_facts(NEW.status, NEW.provider_status);
  o_skip text := hato_rollup_skip(OLD.status, OLD.skip_reason);
  n_skip text := hato_rollup_skip(NEW.status, NEW.skip_reason);
  o_deliv integer;
BEGIN
  IF o_facts = n_facts AND o_skip = n_skip AND coalesce(OLD.provider, '') = coalesce(NEW.provider, '') THEN
    RETURN NULL;  -- pending <-> sending and the like: no figure moves
  END IF;
  o_deliv := CASE WHEN o_facts & 4 > 0 THEN hato_rollup_ms(OLD.created_at, OLD.provider_status_at) END;
  INSERT INTO delivery_rollup_changes (user_id, delivery_id, notification_id, born, channel,
                                       o_provider, o_skip, o_facts, o_sent_ms, o_deliv_ms,
                                       n_provider, n_skip, n_facts, n_sent_ms, n_deliv_ms)
  VALUES (NEW.user_id, NEW.id, NEW.notification_id, NEW.created_at, NEW.channel,
          coalesce(OLD.provider, ''), o_skip, o_facts,
          CASE WHEN OLD.status = 'sent' THEN hato_rollup_ms(OLD.created_at, OLD.sent_at) END, o_deliv,
          coalesce(NEW.provider, ''), n_skip, n_facts,
          CASE WHEN NEW.status = 'sent' THEN hato_rollup_ms(NEW.created_at, NEW.sent_at) END,
          -- delivered, then complained: still delivered when it was (provider_status_at moved to the complaint)
          CASE WHEN n_facts & 4 = 0 THEN NULL WHEN o_facts & 4 > 0 THEN o_deliv
               ELSE hato_rollup_ms(NEW.created_at, NEW.provider_status_at) END);
  RETURN NULL;
END
$$;

-- A delivery's first open and first click count once (later ones, and resent events, do not).
CREATE FUNCTION hato_rollup_engaged() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- Two requests reporting the same delivery's first open: the second waits here for the first to commit,
  -- and its check below (a new snapshot) then sees the first's event.
  PERFORM 1 FROM notification_deliveries d
  WHERE (d.id, d.user_id) IN (SELECT e.delivery_id, e.user_id FROM new_events e
                              WHERE e.event IN ('opened', 'clicked') AND e.delivery_id IS NOT NULL)
  ORDER BY d.id FOR NO KEY UPDATE;
  INSERT INTO delivery_rollup_changes (user_id, delivery_id, notification_id, born, channel,
                                       n_provider, n_skip, n_facts)
  SELECT d.user_id, d.id, d.notification_id, d.created_at, d.channel, coalesce(d.provider, ''),
         hato_rollup_skip(d.status, d.skip_reason), CASE e.event WHEN 'opened' THEN 128 ELSE 256 END
  FROM (SELECT DISTINCT delivery_id, user_id, event FROM new_events
        WHERE event IN ('opened', 'clicked') AND delivery_id IS NOT NULL) e
  JOIN notification_deliveries d ON d.id = e.delivery_id AND d.user_id = e.user_id
  WHERE NOT EXISTS (SELECT 1 FROM provider_events p
                    WHERE p.delivery_id = e.delivery_id AND p.user_id = e.user_id AND p.event = e.event
                      AND p.id NOT IN (SELECT n.id FROM new_events n));
  RETURN NULL;
END
$$;
"""

TRIGGERS = """
CREATE TRIGGER notification_deliveries_rollup_insert AFTER INSERT ON notification_deliveries
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION hato_rollup_inserted();

CREATE TRIGGER notification_deliveries_rollup_update
AFTER UPDATE OF status, provider_status, provider, skip_reason ON notification_deliveries FOR EACH ROW
WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.provider_status IS DISTINCT FROM NEW.provider_status
      OR OLD.provider IS DISTINCT FROM NEW.provider OR OLD.skip_reason IS DISTINCT FROM NEW.skip_reason)
EXECUTE FUNCTION hato_rollup_updated();

CREATE TRIGGER provider_events_rollup AFTER INSERT ON provider_events
REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION hato_rollup_engaged();
"""


def upgrade():
    zeros = sa.text(f"array_fill(0, ARRAY[{BUCKETS}])")
    op.create_table(
        "delivery_rollup_changes",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column("user_id", sa.BigInteger(), primary_key=True),  # the ledger row's, for its shard (0016)
        sa.Column("delivery_id", sa.BigInteger(), nullable=False),
        sa.Column("notification_id", sa.BigInteger(), nullable=False),
        sa.Column("born", sa.DateTime(timezone=True), nullable=False),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("o_provider", sa.Text(), nullable=False, server_default=""),
        sa.Column("o_skip", sa.Text(), nullable=False, server_default=""),
        sa.Column("o_facts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("o_sent_ms", sa.Integer()),
        sa.Column("o_deliv_ms", sa.Integer()),
        sa.Column("n_provider", sa.Text(), nullable=False, server_default=""),
        sa.Column("n_skip", sa.Text(), nullable=False, server_default=""),
        sa.Column("n_facts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("n_sent_ms", sa.Integer()),
        sa.Column("n_deliv_ms", sa.Integer()),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_table(
        "delivery_rollups",
        sa.Column("grain", sa.Text(), primary_key=True),
        sa.Column("bucket", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("type", sa.Text(), primary_key=True),
        sa.Column("channel", sa.Text(), primary_key=True),
        sa.Column("provider", sa.Text(), primary_key=True),
        sa.Column("tenant_id", sa.BigInteger(), primary_key=True),  # 0: no tenant
        sa.Column("skip_reason", sa.Text(), primary_key=True),  # '' unless skipped
        *[
            sa.Column(name, sa.BigInteger(), nullable=False, server_default="0")
            for name in (
                "accepted",
                "sent",
                "delivered",
                "bounced",
                "complained",
                "opened",
                "clicked",
                "failed",
                "skipped",
            )
        ],  # fmt: skip
        sa.Column("sent_hist", postgresql.ARRAY(sa.Integer()), nullable=False, server_default=zeros),
        sa.Column("delivered_hist", postgresql.ARRAY(sa.Integer()), nullable=False, server_default=zeros),
        sa.CheckConstraint("grain IN ('hour', 'day')", name="delivery_rollups_grain"),
    )
    op.execute(FUNCTIONS)
    op.execute(TRIGGERS)


def downgrade():
    op.execute("DROP TRIGGER provider_events_rollup ON provider_events")
    op.execute("DROP TRIGGER notification_deliveries_rollup_update ON notification_deliveries")
    op.execute("DROP TRIGGER notification_deliveries_rollup_insert ON notification_deliveries")
    for name in ("hato_rollup_engaged()", "hato_rollup_updated()", "hato_rollup_inserted()",
                 "hato_rollup_bucket(integer)", "hato_rollup_ms(timestamptz, timestamptz)",
                 "hato_rollup_skip(text, text)", "hato_rollup_facts(text, text)"):  # fmt: skip
        op.execute(f"DROP FUNCTION {name}")
    op.drop_table("delivery_rollups")
    op.drop_table("delivery_rollup_changes")
