"""Delivery attempts, message templates, e-mail suppressions and push subscriptions.

Revision ID: 0003_delivery_tables
Revises: 0002_api_tables
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_delivery_tables"
down_revision = "0002_api_tables"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "delivery_attempts",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column(
            "delivery_id",
            sa.BigInteger(),
            sa.ForeignKey(
                "notification_deliveries.id",
                ondelete="CASCADE",
                name="fk_delivery_attempts_delivery_id_notification_deliveries",
            ),
            nullable=False,
        ),
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("started_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("duration_ms", sa.Integer(), server_default="0", nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "outcome IN ('sent', 'transient', 'permanent', 'deferred')", name="delivery_attempts_outcome"
        ),
    )
    op.create_index("delivery_attempts_delivery_idx", "delivery_attempts", ["delivery_id", "started_at"])
    op.create_index("delivery_attempts_started_idx", "delivery_attempts", ["started_at"])
    op.create_table(
        "message_templates",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column(
            "type",
            sa.Text(),
            sa.ForeignKey(
                "notification_types.type", ondelete="CASCADE", name="fk_message_templates_type_notification_types"
            ),
            nullable=False,
        ),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("locale", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), server_default="", nullable=False),
        sa.Column("body_text", sa.Text(), server_default="", nullable=False),
        sa.Column("body_html", sa.Text(), server_default="", nullable=False),
        sa.Column(
            "updated_by",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="SET NULL", name="fk_message_templates_updated_by_users"),
            nullable=True,
        ),
        sa.Column("updated_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("channel IN ('in_app', 'email', 'push')", name="message_templates_channel"),
        sa.UniqueConstraint("type", "channel", "locale", name="message_templates_once"),
    )
    op.create_table(
        "email_suppressions",
        sa.Column("address", sa.Text(), primary_key=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text(), server_default="", nullable=False),
        sa.Column("created_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "reason IN ('bounce', 'complaint', 'unsubscribe', 'manual')", name="email_suppressions_reason"
        ),
    )
    op.create_table(
        "push_subscriptions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column(
            "user_id",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="CASCADE", name="fk_push_subscriptions_user_id_users"),
            nullable=False,
        ),
        sa.Column("endpoint", sa.Text(), nullable=False),
        sa.Column("p256dh", sa.Text(), nullable=False),
        sa.Column("auth", sa.Text(), nullable=False),
        sa.Column("user_agent", sa.Text(), server_default="", nullable=False),
        sa.Column("created_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("last_success_at", TZ, nullable=True),
        sa.Column("invalidated_at", TZ, nullable=True),
        sa.UniqueConstraint("endpoint", name="uq_push_subscriptions_endpoint"),
    )
    op.create_index("ix_push_subscriptions_user_id", "push_subscriptions", ["user_id"])


def downgrade():
    for table in ("push_subscriptions", "email_suppressions", "message_templates", "delivery_attempts"):
        op.drop_table(table)
