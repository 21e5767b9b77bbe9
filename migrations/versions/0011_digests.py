"""E-mail digests: hourly or daily per user and type, exactly once per (user, period).

A type's e-mail goes out immediately or in the user's hourly/daily digest: the type's default is
notification_types.email_frequency, a user's deviation a digest_preferences row (defaults are not
stored). The engine skips such e-mail with reason 'digested' (so do caps for their excess); the
sweeper claims those ledger rows for a digest_runs row unique per (user, kind, period_start), and a
job sends that run's one e-mail, worded by the operator's digest_templates row for the user's locale.

Revision ID: 0011_digests
Revises: 0010_aggregation
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_digests"
down_revision = "0010_aggregation"
branch_labels = None
depends_on = None

_tz = sa.DateTime(timezone=True)


def upgrade():
    op.add_column(
        "notification_types",
        sa.Column("email_frequency", sa.Text(), nullable=False, server_default="immediate"),
    )
    op.create_check_constraint(
        "notification_types_email_frequency",
        "notification_types",
        "email_frequency IN ('immediate', 'hourly', 'daily')",
    )
    op.add_column("users", sa.Column("digest_time", sa.Time(), nullable=True))
    op.create_table(
        "digest_preferences",
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("type", sa.Text(), sa.ForeignKey("notification_types.type", ondelete="CASCADE"), primary_key=True),
        sa.Column("frequency", sa.Text(), nullable=False),
        sa.CheckConstraint("frequency IN ('immediate', 'hourly', 'daily')", name="digest_preferences_frequency"),
    )
    op.create_table(
        "digest_runs",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("period_start", _tz, nullable=False),
        sa.Column("status", sa.Text(), nullable=False, server_default="pending"),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("locked_until", _tz),
        sa.Column("next_attempt_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.Column("ledger_id", sa.BigInteger()),
        sa.Column("item_count", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("error", sa.Text()),
        sa.Column("created_at", _tz, nullable=False, server_default=sa.func.now()),
        sa.Column("sent_at", _tz),
        sa.UniqueConstraint("user_id", "kind", "period_start", name="digest_runs_once"),
        sa.CheckConstraint("kind IN ('hourly', 'daily')", name="digest_runs_kind"),
        sa.CheckConstraint(
            "status IN ('pending', 'sending', 'sent', 'empty', 'skipped', 'failed')", name="digest_runs_status"
        ),
    )
    op.create_index(
        "digest_runs_open_idx",
        "digest_runs",
        ["next_attempt_at", "id"],
        postgresql_where=sa.text("status IN ('pending', 'sending')"),
    )
    op.create_table(
        "digest_templates",
        sa.Column("locale", sa.Text(), primary_key=True),
        sa.Column("subject", sa.Text(), nullable=False, server_default=""),
        sa.Column("body_text", sa.Text(), nullable=False, server_default=""),
        sa.Column("body_html", sa.Text(), nullable=False, server_default=""),
        sa.Column("updated_by", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="SET NULL")),
        sa.Column("updated_at", _tz, nullable=False, server_default=sa.func.now()),
    )
    op.add_column(
        "notification_deliveries",
        sa.Column("digest_id", sa.BigInteger(), sa.ForeignKey("digest_runs.id", ondelete="SET NULL")),
    )
    op.create_index(
        "notification_deliveries_digest_wait_idx",
        "notification_deliveries",
        ["notification_id"],
        postgresql_where=sa.text("skip_reason = 'digested' AND digest_id IS NULL"),
    )
    op.create_index(
        "notification_deliveries_digest_idx",
        "notification_deliveries",
        ["digest_id"],
        postgresql_where=sa.text("digest_id IS NOT NULL"),
    )


def downgrade():
    op.drop_index("notification_deliveries_digest_idx", table_name="notification_deliveries")
    op.drop_index("notification_deliveries_digest_wait_idx", table_name="notification_deliveries")
    op.drop_column("notification_deliveries", "digest_id")
    op.drop_index("digest_runs_open_idx", table_name="digest_runs")
    op.drop_table("digest_runs")
    op.drop_table("digest_templates")
    op.drop_table("digest_preferences")
    op.drop_column("users", "digest_time")
    op.drop_constraint("notification_types_email_frequency", "notification_types", type_="check")
    op.drop_column("notification_types", "email_frequency")
