"""Channels per request and per type (seed 003): routing order and mode, fallback chains, channels from the registry.

- notification_types: `channels` (the order a notification of the type is sent in; NULL: every channel in the
  registry's order), `channel_mode` (all: every listed channel the member has on; first: the first that
  reaches them) and `default_channels` (the type's default for channels without a seed column of their own;
  the seed's default_in_app / default_email / default_push stay what they are), and `default_on`, generated
  from both: the channels on by default, which the preference rule reads.
- scheduled_notifications: the request's `channels` and `channel_mode`, kept until the row is released.
- notification_deliveries: `route_rank`, the row's place in a "first" chain (NULL: not in one), and two more
  statuses: `standby` (a later channel of a chain, waiting for its turn) and `passed` (this channel could
  not reach the member and handed over to the next).
- The hand-over is one trigger, so every statement that ends a chain's row (a send's record, a skip, an
  expiry, a lease that ran out, a cancellation, a read that cancels an escalation) hands over the same way:
  a row that fails, or is skipped because its channel cannot reach the member, becomes `passed` and wakes
  the next standby row (pending, due now); a row that is sent, or skipped for a reason that holds for
  every channel (cancelled, read, seen, online, digested, capped, muted), closes the standby rows behind it.
- The channel check constraints are dropped here: migrations/env.py makes them from the channel registry
  at every upgrade (app/delivery/channel_constraints.py).

Revision ID: 0018_channel_routing
Revises: 0017_channel_switches
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0018_channel_routing"
down_revision = "0017_channel_switches"
branch_labels = None
depends_on = None

DEFAULT_ON = (
    "array_remove(ARRAY[CASE WHEN default_in_app THEN 'in_app' END, CASE WHEN default_email THEN 'email' END, "
    "CASE WHEN default_push THEN 'push' END], NULL) || default_channels"
)
OLD_STATUSES = "('pending', 'sending', 'sent', 'skipped', 'failed')"
NEW_STATUSES = "('pending', 'sending', 'sent', 'skipped', 'failed', 'standby', 'passed')"
# Skip reasons that hold for every channel of a chain: the rows behind it are closed with the same reason.
STOP_REASONS = "ARRAY['cancelled', 'read', 'seen', 'online', 'digested', 'capped', 'muted', 'not_needed']"

ROUTE_FUNCTION = f"""
CREATE FUNCTION hato_route_next() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  next_id bigint;
BEGIN
  IF NEW.status = 'sent' OR (NEW.status = 'skipped' AND NEW.skip_reason = ANY({STOP_REASONS})) THEN
    UPDATE notification_deliveries
    SET status = 'skipped', updated_at = now(),
        skip_reason = CASE WHEN NEW.status = 'sent' THEN 'not_needed' ELSE NEW.skip_reason END
    WHERE notification_id = NEW.notification_id AND user_id = NEW.user_id AND status = 'standby';
  ELSE
    -- next_attempt_at now, updated_at as it was: the sweeper's TAKE_DUE_SQL sees a row that fell due.
    UPDATE notification_deliveries SET status = 'pending', next_attempt_at = now()
    WHERE id = (SELECT id FROM notification_deliveries
                WHERE notification_id = NEW.notification_id AND user_id = NEW.user_id AND status = 'standby'
                ORDER BY route_rank LIMIT 1)
      AND user_id = NEW.user_id
    RETURNING id INTO next_id;
    IF next_id IS NOT NULL THEN
      NEW.status := 'passed';
    END IF;
  END IF;
  RETURN NEW;
END
$$
"""

ROUTE_TRIGGER = """
CREATE TRIGGER notification_deliveries_route
BEFORE UPDATE OF status ON notification_deliveries
FOR EACH ROW
WHEN (OLD.route_rank IS NOT NULL AND OLD.status NOT IN ('standby', 'passed') AND NEW.status <> OLD.status
      AND NEW.status IN ('sent', 'failed', 'skipped'))
EXECUTE FUNCTION hato_route_next()
"""


def upgrade():
    op.add_column("notification_types", sa.Column("channels", postgresql.ARRAY(sa.Text())))
    op.add_column("notification_types", sa.Column("channel_mode", sa.Text(), nullable=False, server_default="all"))
    op.add_column(
        "notification_types",
        sa.Column("default_channels", postgresql.ARRAY(sa.Text()), nullable=False, server_default="{}"),
    )
    op.create_check_constraint(
        "notification_types_channel_mode", "notification_types", "channel_mode IN ('all', 'first')"
    )
    op.add_column("notification_types", sa.Column("default_on", postgresql.ARRAY(sa.Text()), sa.Computed(DEFAULT_ON)))
    op.add_column("scheduled_notifications", sa.Column("channels", postgresql.ARRAY(sa.Text())))
    op.add_column("scheduled_notifications", sa.Column("channel_mode", sa.Text()))
    op.create_check_constraint(
        "scheduled_notifications_channel_mode",
        "scheduled_notifications",
        "channel_mode IS NULL OR channel_mode IN ('all', 'first')",
    )
    op.add_column("notification_deliveries", sa.Column("route_rank", sa.SmallInteger()))
    op.drop_constraint("notification_deliveries_status", "notification_deliveries")
    op.create_check_constraint("notification_deliveries_status", "notification_deliveries", f"status IN {NEW_STATUSES}")
    for table, name in (
        ("notification_preferences", "notification_preferences_channel"),
        ("notification_deliveries", "notification_deliveries_channel"),
        ("message_templates", "message_templates_channel"),
    ):
        op.drop_constraint(name, table)
    op.execute(ROUTE_FUNCTION)
    op.execute(ROUTE_TRIGGER)


def downgrade():
    op.execute("DROP TRIGGER notification_deliveries_route ON notification_deliveries")
    op.execute("DROP FUNCTION hato_route_next()")
    for table, name in (
        ("notification_types", "notification_types_channels"),
        ("notification_types", "notification_types_default_channels"),
        ("scheduled_notifications", "scheduled_notifications_channels"),
    ):
        op.execute(f'ALTER TABLE {table} DROP CONSTRAINT IF EXISTS "{name}"')
    for table, name, channels in (
        ("notification_preferences", "notification_preferences_channel", "('in_app', 'email', 'push')"),
        ("notification_deliveries", "notification_deliveries_channel", "('email', 'push')"),
        ("message_templates", "message_templates_channel", "('in_app', 'email', 'push')"),
    ):
        op.execute(f'ALTER TABLE {table} DROP CONSTRAINT IF EXISTS "{name}"')
        op.create_check_constraint(name, table, f"channel IN {channels}")
    op.execute("UPDATE notification_deliveries SET status = 'skipped' WHERE status IN ('standby', 'passed')")
    op.drop_constraint("notification_deliveries_status", "notification_deliveries")
    op.create_check_constraint("notification_deliveries_status", "notification_deliveries", f"status IN {OLD_STATUSES}")
    op.drop_column("notification_deliveries", "route_rank")
    op.drop_constraint("scheduled_notifications_channel_mode", "scheduled_notifications")
    op.drop_column("scheduled_notifications", "channel_mode")
    op.drop_column("scheduled_notifications", "channels")
    op.drop_constraint("notification_types_channel_mode", "notification_types")
    op.drop_column("notification_types", "default_on")
    op.drop_column("notification_types", "default_channels")
    op.drop_column("notification_types", "channel_mode")
    op.drop_column("notification_types", "channels")
