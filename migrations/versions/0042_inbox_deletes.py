"""Bulk inbox actions (issue 33): inbox_undo, one row per notification a bulk action changed, with its state before.

Undo puts back exactly the rows of its token (read_at, archived_at and, for a delete, visibility); the sweeper
drops the rows after expires_at and then removes a deleted notification unless INBOX_DELETE_KEEPS_FOR_RETENTION.
user_id leads the key (the distribution rule, 0016); the notification's key cascades, so a removed row takes its
undo row along.

Revision ID: 0042_inbox_deletes
Revises: 0041_delivery_rollups
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0042_inbox_deletes"
down_revision = "0041_delivery_rollups"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "inbox_undo",
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("token", sa.Text(), primary_key=True),
        sa.Column("notification_id", sa.BigInteger(), primary_key=True),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("read_at", sa.DateTime(timezone=True)),
        sa.Column("archived_at", sa.DateTime(timezone=True)),
        sa.Column("snoozed_until", sa.DateTime(timezone=True)),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["notification_id", "user_id"], ["notifications.id", "notifications.user_id"], ondelete="CASCADE"
        ),
        sa.CheckConstraint("action IN ('read', 'archive', 'delete')", name="inbox_undo_action"),
    )
    op.create_index("inbox_undo_expires_idx", "inbox_undo", ["expires_at"])


def downgrade():
    op.drop_table("inbox_undo")
