"""Console II: campaigns, list audiences, bulk DLQ operations; notifications link to their campaign.

Revision ID: 0005_campaign_tables
Revises: 0004_console_tables
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005_campaign_tables"
down_revision = "0004_console_tables"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "campaigns",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column(
            "type",
            sa.Text(),
            sa.ForeignKey("notification_types.type", name="fk_campaigns_type_notification_types"),
            nullable=False,
        ),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("link_path", sa.Text(), nullable=True),
        sa.Column("data", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("audience_kind", sa.Text(), server_default="all", nullable=False),
        sa.Column("audience_locale", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), server_default="draft", nullable=False),
        sa.Column("scheduled_at", TZ, nullable=True),
        sa.Column("total", sa.Integer(), server_default="0", nullable=False),
        sa.Column("done", sa.Integer(), server_default="0", nullable=False),
        sa.Column("cursor_user_id", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column(
            "created_by",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="SET NULL", name="fk_campaigns_created_by_users"),
            nullable=True,
        ),
        sa.Column("created_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("started_at", TZ, nullable=True),
        sa.Column("finished_at", TZ, nullable=True),
        sa.CheckConstraint(
            "status IN ('draft', 'scheduled', 'running', 'done', 'cancelled', 'failed')", name="campaigns_status"
        ),
        sa.CheckConstraint("audience_kind IN ('all', 'locale', 'list')", name="campaigns_audience_kind"),
    )
    op.create_index("campaigns_list_idx", "campaigns", [sa.text("created_at DESC"), sa.text("id DESC")])
    op.create_index(
        "campaigns_due_idx", "campaigns", ["scheduled_at"], postgresql_where=sa.text("status = 'scheduled'")
    )
    op.create_table(
        "campaign_recipients",
        sa.Column(
            "campaign_id",
            sa.BigInteger(),
            sa.ForeignKey("campaigns.id", ondelete="CASCADE", name="fk_campaign_recipients_campaign_id_campaigns"),
            nullable=False,
        ),
        sa.Column(
            "user_id",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="CASCADE", name="fk_campaign_recipients_user_id_users"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("campaign_id", "user_id", name="campaign_recipients_pkey"),
    )
    op.create_table(
        "bulk_operations",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("filters", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("reason", sa.Text(), server_default="", nullable=False),
        sa.Column("status", sa.Text(), server_default="queued", nullable=False),
        sa.Column("total", sa.Integer(), server_default="0", nullable=False),
        sa.Column("done", sa.Integer(), server_default="0", nullable=False),
        sa.Column("cursor_id", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column(
            "created_by",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="SET NULL", name="fk_bulk_operations_created_by_users"),
            nullable=True,
        ),
        sa.Column("created_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("finished_at", TZ, nullable=True),
        sa.CheckConstraint("kind IN ('replay', 'discard')", name="bulk_operations_kind"),
        sa.CheckConstraint("status IN ('queued', 'running', 'done', 'failed')", name="bulk_operations_status"),
    )
    op.create_foreign_key(
        "fk_notifications_campaign_id_campaigns",
        "notifications",
        "campaigns",
        ["campaign_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.create_index(
        "notifications_campaign_idx",
        "notifications",
        ["campaign_id"],
        postgresql_where=sa.text("campaign_id IS NOT NULL"),
    )


def downgrade():
    op.drop_index("notifications_campaign_idx", table_name="notifications")
    op.drop_constraint("fk_notifications_campaign_id_campaigns", "notifications", type_="foreignkey")
    for table in ("bulk_operations", "campaign_recipients", "campaigns"):
        op.drop_table(table)
