"""A type's pushes go only when the member's open tab did not show the notification (issue 30, seed 004).

notification_types.push_when_offline: a push (web or phone) of the type waits REALTIME_ACK_TIMEOUT_SECONDS
for a tab of the member to ack the frame that showed it (app/live/seen.py), and is skipped when one did.

Revision ID: 0031_push_when_offline
Revises: 0030_trace_context
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0031_push_when_offline"
down_revision = "0030_trace_context"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column(
        "notification_types", sa.Column("push_when_offline", sa.Boolean(), server_default=sa.false(), nullable=False)
    )


def downgrade():
    op.drop_column("notification_types", "push_when_offline")
