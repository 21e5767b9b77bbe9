"""Provider events in: what SendGrid, Mailgun and Postmark report after a send; expiry of held-back rows.

provider_events keeps each event a provider's webhook reported (delivered, bounced, soft_bounced,
complained, opened, clicked), matched to its delivery through the provider message id recorded at send
time (delivery_id NULL: no delivery has that id; those are counted, never an error). UNIQUE (provider,
provider_event_id) makes a resent event count once. The delivery keeps the strongest of them in
provider_status (delivered < bounced < complained). held_since is when a pending delivery was first
held back by an open breaker, an empty token bucket or a paused push service without a try; the
sweeper moves rows held longer than DELIVERY_MAX_AGE to the DLQ as `expired` (an `expired` attempt
row says so). The expression index finds a delivery by its message id without the angle brackets.
(On a large live ledger, build the two new indexes CONCURRENTLY by hand first.)

Revision ID: 0013_provider_events
Revises: 0012_user_language
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0013_provider_events"
down_revision = "0012_user_language"
branch_labels = None
depends_on = None

_tz = sa.DateTime(timezone=True)
EVENTS = "('delivered', 'bounced', 'soft_bounced', 'complained', 'opened', 'clicked')"


def upgrade():
    op.add_column("notification_deliveries", sa.Column("provider_status", sa.Text(), nullable=True))
    op.add_column("notification_deliveries", sa.Column("provider_status_at", _tz, nullable=True))
    op.add_column("notification_deliveries", sa.Column("held_since", _tz, nullable=True))
    op.create_check_constraint(
        "notification_deliveries_provider_status",
        "notification_deliveries",
        "provider_status IS NULL OR provider_status IN ('delivered', 'bounced', 'complained')",
    )
    op.create_index(
        "notification_deliveries_message_idx",
        "notification_deliveries",
        [sa.text("btrim(provider_message_id, '<>')")],
        postgresql_where=sa.text("provider_message_id IS NOT NULL"),
    )
    op.create_index(
        "notification_deliveries_held_idx",
        "notification_deliveries",
        ["held_since"],
        postgresql_where=sa.text("status = 'pending' AND held_since IS NOT NULL"),
    )
    op.drop_constraint("delivery_attempts_outcome", "delivery_attempts", type_="check")
    op.create_check_constraint(
        "delivery_attempts_outcome",
        "delivery_attempts",
        "outcome IN ('sent', 'transient', 'permanent', 'deferred', 'expired')",
    )
    op.create_table(
        "provider_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column(
            "delivery_id",
            sa.BigInteger(),
            sa.ForeignKey("notification_deliveries.id", ondelete="CASCADE"),
            nullable=True,
        ),
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("provider_event_id", sa.Text(), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("message_id", sa.Text(), nullable=False, server_default=""),
        sa.Column("detail", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("occurred_at", _tz, nullable=False),
        sa.Column("received_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("provider", "provider_event_id", name="provider_events_once"),
        sa.CheckConstraint(f"event IN {EVENTS}", name="provider_events_event"),
    )
    op.create_index(
        "provider_events_delivery_idx",
        "provider_events",
        ["delivery_id", "occurred_at"],
        postgresql_where=sa.text("delivery_id IS NOT NULL"),
    )


def downgrade():
    op.drop_index("provider_events_delivery_idx", table_name="provider_events")
    op.drop_table("provider_events")
    op.execute("DELETE FROM delivery_attempts WHERE outcome = 'expired'")
    op.drop_constraint("delivery_attempts_outcome", "delivery_attempts", type_="check")
    op.create_check_constraint(
        "delivery_attempts_outcome", "delivery_attempts", "outcome IN ('sent', 'transient', 'permanent', 'deferred')"
    )
    op.drop_index("notification_deliveries_held_idx", table_name="notification_deliveries")
    op.drop_index("notification_deliveries_message_idx", table_name="notification_deliveries")
    op.drop_constraint("notification_deliveries_provider_status", "notification_deliveries", type_="check")
    op.drop_column("notification_deliveries", "held_since")
    op.drop_column("notification_deliveries", "provider_status_at")
    op.drop_column("notification_deliveries", "provider_status")
