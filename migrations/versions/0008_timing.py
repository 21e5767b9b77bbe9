"""Smart timing and routing: escalation, online routing and caps per type; scheduled sends, cancellation,
thread mutes, snooze, and the last-seen time per user (the seed's method C).

Scheduled notifications wait in their own table until due, so the unread index (and the badge) never
sees them; the sweeper releases due rows set-based into `notifications`. The unread index gains
`created_at`, so the unseen count (unread rows newer than the user's last-seen time) is an Index Only
Scan too. A snoozed row is taken out of the unread index (read_at set) and hidden until
`snoozed_until`, then comes back on top as unread.

Revision ID: 0008_timing
Revises: 0007_security
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008_timing"
down_revision = "0007_security"
branch_labels = None
depends_on = None

_tz = sa.DateTime(timezone=True)


def upgrade():
    op.add_column("notification_types", sa.Column("escalate_after", sa.Integer(), nullable=True))
    op.add_column("notification_types", sa.Column("escalate_unless", sa.Text(), nullable=False, server_default="read"))
    op.add_column(
        "notification_types", sa.Column("skip_when_online", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.add_column("notification_types", sa.Column("cap_count", sa.Integer(), nullable=True))
    op.add_column("notification_types", sa.Column("cap_window", sa.Integer(), nullable=True))
    op.create_check_constraint(
        "notification_types_escalation",
        "notification_types",
        "(escalate_after IS NULL OR escalate_after > 0) AND escalate_unless IN ('read', 'seen')",
    )
    op.create_check_constraint(
        "notification_types_cap",
        "notification_types",
        "(cap_count IS NULL) = (cap_window IS NULL) AND (cap_count IS NULL OR (cap_count > 0 AND cap_window > 0))",
    )

    op.add_column("notifications", sa.Column("group_key", sa.Text(), nullable=True))
    op.add_column("notifications", sa.Column("cancellation_key", sa.Text(), nullable=True))
    op.add_column("notifications", sa.Column("snoozed_until", _tz, nullable=True))
    op.create_index(
        "notifications_cancellation_idx",
        "notifications",
        ["cancellation_key"],
        postgresql_where=sa.text("cancellation_key IS NOT NULL"),
    )
    op.create_index(
        "notifications_snoozed_idx",
        "notifications",
        ["snoozed_until"],
        postgresql_where=sa.text("snoozed_until IS NOT NULL"),
    )
    op.drop_index("notifications_unread_idx", table_name="notifications")
    op.create_index(
        "notifications_unread_idx",
        "notifications",
        ["user_id", "created_at"],
        postgresql_where=sa.text("read_at IS NULL"),
    )

    op.add_column("notification_deliveries", sa.Column("escalation", sa.Text(), nullable=True))
    op.create_check_constraint(
        "notification_deliveries_escalation",
        "notification_deliveries",
        "escalation IS NULL OR escalation IN ('read', 'seen')",
    )

    op.create_table(
        "scheduled_notifications",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("type", sa.Text(), sa.ForeignKey("notification_types.type"), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("link_path", sa.Text(), nullable=True),
        sa.Column("data", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("dedupe_key", sa.Text(), nullable=False),
        sa.Column("group_key", sa.Text(), nullable=True),
        sa.Column("cancellation_key", sa.Text(), nullable=True),
        sa.Column("api_key_id", sa.BigInteger(), sa.ForeignKey("api_keys.id", ondelete="SET NULL"), nullable=True),
        sa.Column("send_at", _tz, nullable=False),
        sa.Column("created_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.UniqueConstraint("user_id", "dedupe_key", name="scheduled_notifications_dedupe"),
    )
    op.create_index("scheduled_notifications_due_idx", "scheduled_notifications", ["send_at", "id"])
    op.create_index(
        "scheduled_notifications_cancellation_idx",
        "scheduled_notifications",
        ["cancellation_key"],
        postgresql_where=sa.text("cancellation_key IS NOT NULL"),
    )

    op.create_table(
        "notification_last_seen",
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seen_at", _tz, nullable=False),
    )
    op.create_table(
        "notification_mutes",
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("group_key", sa.Text(), primary_key=True),
        sa.Column("created_at", _tz, nullable=False, server_default=sa.func.now()),
    )


def downgrade():
    op.drop_table("notification_mutes")
    op.drop_table("notification_last_seen")
    op.drop_index("scheduled_notifications_cancellation_idx", table_name="scheduled_notifications")
    op.drop_index("scheduled_notifications_due_idx", table_name="scheduled_notifications")
    op.drop_table("scheduled_notifications")
    op.drop_constraint("notification_deliveries_escalation", "notification_deliveries")
    op.drop_column("notification_deliveries", "escalation")
    op.drop_index("notifications_unread_idx", table_name="notifications")
    op.create_index(
        "notifications_unread_idx", "notifications", ["user_id"], postgresql_where=sa.text("read_at IS NULL")
    )
    op.drop_index("notifications_snoozed_idx", table_name="notifications")
    op.drop_index("notifications_cancellation_idx", table_name="notifications")
    op.drop_column("notifications", "snoozed_until")
    op.drop_column("notifications", "cancellation_key")
    op.drop_column("notifications", "group_key")
    op.drop_constraint("notification_types_cap", "notification_types")
    op.drop_constraint("notification_types_escalation", "notification_types")
    for column in ("cap_window", "cap_count", "skip_when_online", "escalate_unless", "escalate_after"):
        op.drop_column("notification_types", column)
