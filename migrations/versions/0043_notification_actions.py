"""Action buttons (issue 33): notifications.actions, and notification_action_clicks (one row per click).

notifications.actions holds the request's buttons as sent ([{label, labels?, url | action}], at most two; NULL:
none). notification_action_clicks is the once-only record of a named action: its key (user_id, notification_id,
name) makes a second click send nothing, and `state` is what the product answered (PATCH
/v1/notifications/<id>/actions/<name>). user_id first, the distribution key (0016); it cascades with its row.

Revision ID: 0043_notification_actions
Revises: 0042_inbox_deletes
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0043_notification_actions"
down_revision = "0042_inbox_deletes"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("notifications", sa.Column("actions", JSONB(), nullable=True))
    op.create_table(
        "notification_action_clicks",
        sa.Column("user_id", sa.BigInteger(), primary_key=True),
        sa.Column("notification_id", sa.BigInteger(), primary_key=True),
        sa.Column("name", sa.Text(), primary_key=True),
        sa.Column("clicked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("via", sa.Text(), nullable=True),
        sa.Column("state", sa.Text(), nullable=True),
        sa.Column("state_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["notification_id", "user_id"], ["notifications.id", "notifications.user_id"], ondelete="CASCADE"
        ),
    )


def downgrade():
    op.drop_table("notification_action_clicks")
    op.drop_column("notifications", "actions")
