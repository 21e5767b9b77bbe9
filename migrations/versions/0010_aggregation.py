"""Aggregation: notifications of one (user, type, group_key) within a type's window collapse into one row.

A type's aggregation_window (seconds, NULL = off) opens a window at the first event; the row keeps
window_ends_at, its event and distinct-actor counts and the first actors' names, and every event
joining it is kept in notification_events (per-event dedupe key, actor, data).

Revision ID: 0010_aggregation
Revises: 0009_caps
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0010_aggregation"
down_revision = "0009_caps"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("notification_types", sa.Column("aggregation_window", sa.Integer(), nullable=True))
    op.create_check_constraint(
        "notification_types_aggregation", "notification_types", "aggregation_window IS NULL OR aggregation_window > 0"
    )
    op.add_column("notifications", sa.Column("window_ends_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("notifications", sa.Column("event_count", sa.Integer(), server_default="1", nullable=False))
    op.add_column("notifications", sa.Column("actor_count", sa.Integer(), server_default="0", nullable=False))
    op.add_column(
        "notifications", sa.Column("actor_names", JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False)
    )
    op.create_index(
        "notifications_window_idx",
        "notifications",
        ["user_id", "type", "group_key", sa.text("window_ends_at DESC")],
        postgresql_where=sa.text("window_ends_at IS NOT NULL"),
    )
    op.create_table(
        "notification_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column(
            "notification_id", sa.BigInteger(), sa.ForeignKey("notifications.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("dedupe_key", sa.Text(), nullable=False),
        sa.Column("actor_id", sa.Text(), nullable=True),
        sa.Column("actor_name", sa.Text(), nullable=True),
        sa.Column("data", JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.UniqueConstraint("user_id", "dedupe_key", name="notification_events_dedupe"),
    )
    # by row, then actor: the events listing, and "is this actor new to the row" at each event
    op.create_index("notification_events_notification_idx", "notification_events", ["notification_id", "actor_id"])


def downgrade():
    op.drop_index("notification_events_notification_idx", table_name="notification_events")
    op.drop_table("notification_events")
    op.drop_index("notifications_window_idx", table_name="notifications")
    for column in ("actor_names", "actor_count", "event_count", "window_ends_at"):
        op.drop_column("notifications", column)
    op.drop_constraint("notification_types_aggregation", "notification_types", type_="check")
    op.drop_column("notification_types", "aggregation_window")
