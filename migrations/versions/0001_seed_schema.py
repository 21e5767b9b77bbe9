"""The seed article's data model plus users.

Revision ID: 0001_seed_schema
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001_seed_schema"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def _id():
    return sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True)


def upgrade():
    op.create_table(
        "users",
        _id(),
        sa.Column("external_id", sa.Text(), nullable=True),
        sa.Column("email", sa.Text(), nullable=True),
        sa.Column("display_name", sa.Text(), server_default="", nullable=False),
        sa.Column("locale", sa.Text(), server_default="en", nullable=False),
        sa.Column("timezone", sa.Text(), server_default="UTC", nullable=False),
        sa.Column("role", sa.Text(), server_default="member", nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=True),
        sa.Column("quiet_hours_start", sa.Time(), nullable=True),
        sa.Column("quiet_hours_end", sa.Time(), nullable=True),
        sa.Column("created_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("role IN ('member', 'operator', 'admin')", name="users_role"),
        sa.UniqueConstraint("external_id", name="uq_users_external_id"),
    )
    op.create_index("users_email_key", "users", [sa.text("lower(email)")], unique=True)

    op.create_table(
        "notification_types",
        sa.Column("type", sa.Text(), primary_key=True),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("default_in_app", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("default_email", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("default_push", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("mandatory", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("priority", sa.Text(), server_default="default", nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.CheckConstraint("priority IN ('high', 'default', 'low')", name="notification_types_priority"),
    )

    op.create_table(
        "notifications",
        _id(),
        sa.Column(
            "user_id",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="CASCADE", name="fk_notifications_user_id_users"),
            nullable=False,
        ),
        sa.Column(
            "type",
            sa.Text(),
            sa.ForeignKey("notification_types.type", name="fk_notifications_type_notification_types"),
            nullable=False,
        ),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("link_path", sa.Text(), nullable=True),
        sa.Column("dedupe_key", sa.Text(), nullable=False),
        sa.Column("read_at", TZ, nullable=True),
        sa.Column("created_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("data", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("campaign_id", sa.BigInteger(), nullable=True),
        sa.Column("archived_at", TZ, nullable=True),
        sa.Column("in_app", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.UniqueConstraint("user_id", "dedupe_key", name="notifications_dedupe"),
    )
    op.create_index(
        "notifications_list_idx", "notifications", ["user_id", sa.text("created_at DESC"), sa.text("id DESC")]
    )
    op.create_index(
        "notifications_unread_idx", "notifications", ["user_id"], postgresql_where=sa.text("read_at IS NULL")
    )

    op.create_table(
        "announcements",
        _id(),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("published_at", TZ, nullable=False),
        sa.Column("expires_at", TZ, nullable=True),
    )
    op.create_index("announcements_published_idx", "announcements", [sa.text("published_at DESC")])

    op.create_table(
        "announcement_reads",
        sa.Column(
            "user_id",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="CASCADE", name="fk_announcement_reads_user_id_users"),
            nullable=False,
        ),
        sa.Column(
            "announcement_id",
            sa.BigInteger(),
            sa.ForeignKey(
                "announcements.id", ondelete="CASCADE", name="fk_announcement_reads_announcement_id_announcements"
            ),
            nullable=False,
        ),
        sa.Column("read_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "announcement_id", name="announcement_reads_pkey"),
    )

    op.create_table(
        "notification_preferences",
        sa.Column(
            "user_id",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="CASCADE", name="fk_notification_preferences_user_id_users"),
            nullable=False,
        ),
        sa.Column(
            "type",
            sa.Text(),
            sa.ForeignKey("notification_types.type", name="fk_notification_preferences_type_notification_types"),
            nullable=False,
        ),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.CheckConstraint("channel IN ('in_app', 'email', 'push')", name="notification_preferences_channel"),
        sa.PrimaryKeyConstraint("user_id", "type", "channel", name="notification_preferences_pkey"),
    )

    op.create_table(
        "notification_deliveries",
        _id(),
        sa.Column(
            "notification_id",
            sa.BigInteger(),
            sa.ForeignKey(
                "notifications.id", ondelete="CASCADE", name="fk_notification_deliveries_notification_id_notifications"
            ),
            nullable=False,
        ),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), server_default="pending", nullable=False),
        sa.Column("sent_at", TZ, nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("locked_until", TZ, nullable=True),
        sa.Column("provider", sa.Text(), nullable=True),
        sa.Column("provider_message_id", sa.Text(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("error_kind", sa.Text(), nullable=True),
        sa.Column("skip_reason", sa.Text(), nullable=True),
        sa.Column("rendered_subject", sa.Text(), nullable=True),
        sa.Column("rendered_body", sa.Text(), nullable=True),
        sa.Column("created_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("channel IN ('email', 'push')", name="notification_deliveries_channel"),
        sa.CheckConstraint(
            "status IN ('pending', 'sending', 'sent', 'skipped', 'failed')", name="notification_deliveries_status"
        ),
        sa.UniqueConstraint("notification_id", "channel", name="notification_deliveries_once"),
    )
    # The sweeper's two scans: due pending rows, and expired leases.
    op.create_index(
        "notification_deliveries_due_idx",
        "notification_deliveries",
        ["next_attempt_at"],
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index(
        "notification_deliveries_lease_idx",
        "notification_deliveries",
        ["locked_until"],
        postgresql_where=sa.text("status = 'sending'"),
    )


def downgrade():
    for table in (
        "notification_deliveries",
        "notification_preferences",
        "announcement_reads",
        "announcements",
        "notifications",
        "notification_types",
        "users",
    ):
        op.drop_table(table)
