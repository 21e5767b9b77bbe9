"""Tenants (issue 32): tenants, their members and default preferences; notifications carry their tenant.

- tenants: key (the API's name), name, branding (logo URL, colour, e-mail sender name, reply-to), quotas (a rate
  with a burst, notifications a day: seed 004's per-tenant limits, set in the console);
- tenant_members (user_id, tenant_id): user_id first, the distribution key (0016), so a member's tenants live on
  the member's shard; tenant_members_tenant_idx lists a tenant's members;
- tenant_preferences (tenant_id, type, channel, enabled): a tenant's defaults between the type's and the member's;
  its channel check follows the registry (app/delivery/channel_constraints.py);
- notifications.tenant_id and scheduled_notifications.tenant_id, nullable, no foreign key (a deleted tenant's
  rows keep its id, never reused); two partial indexes serve a tenant's part of an inbox (unread count, list).

Revision ID: 0038_tenants
Revises: 0037_quotas
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0038_tenants"
down_revision = "0037_quotas"
branch_labels = None
depends_on = None

_tz = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "tenants",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column("key", sa.Text(), nullable=False, unique=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("logo_url", sa.Text()),
        sa.Column("primary_color", sa.Text()),
        sa.Column("email_sender_name", sa.Text()),
        sa.Column("reply_to", sa.Text()),
        sa.Column("created_at", _tz, server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", _tz, server_default=sa.func.now(), nullable=False),
        # its quotas (app/quotas), as an API key's (0037): NULL is no limit
        sa.Column("rate_per_second", sa.Float()),
        sa.Column("rate_burst", sa.Integer()),
        sa.Column("daily_quota", sa.BigInteger()),
        sa.CheckConstraint("rate_per_second > 0 AND rate_per_second <= 1000000", name="tenants_rate"),
        sa.CheckConstraint("rate_burst BETWEEN 1 AND 1000000", name="tenants_burst"),
        sa.CheckConstraint("daily_quota BETWEEN 0 AND 1000000000000", name="tenants_daily"),
    )
    op.create_table(
        "tenant_members",
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("tenant_id", sa.BigInteger(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("created_at", _tz, server_default=sa.func.now(), nullable=False),
    )
    op.create_index("tenant_members_tenant_idx", "tenant_members", ["tenant_id", "user_id"])
    op.create_table(
        "tenant_preferences",
        sa.Column("tenant_id", sa.BigInteger(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True),
        sa.Column(
            "type",
            sa.Text(),
            sa.ForeignKey("notification_types.type", ondelete="CASCADE", onupdate="CASCADE"),
            primary_key=True,
        ),
        sa.Column("channel", sa.Text(), primary_key=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
    )
    op.add_column("notifications", sa.Column("tenant_id", sa.BigInteger()))
    op.add_column("scheduled_notifications", sa.Column("tenant_id", sa.BigInteger()))
    op.create_index(
        "notifications_tenant_unread_idx",
        "notifications",
        ["user_id", "tenant_id", "created_at"],
        postgresql_where=sa.text("read_at IS NULL AND tenant_id IS NOT NULL"),
    )
    op.create_index(
        "notifications_tenant_list_idx",
        "notifications",
        ["user_id", "tenant_id", sa.text("created_at DESC"), sa.text("id DESC")],
        postgresql_where=sa.text("tenant_id IS NOT NULL"),
    )


def downgrade():
    op.drop_index("notifications_tenant_list_idx", table_name="notifications")
    op.drop_index("notifications_tenant_unread_idx", table_name="notifications")
    op.drop_column("scheduled_notifications", "tenant_id")
    op.drop_column("notifications", "tenant_id")
    op.drop_table("tenant_preferences")
    op.drop_index("tenant_members_tenant_idx", table_name="tenant_members")
    op.drop_table("tenant_members")
    op.drop_table("tenants")
