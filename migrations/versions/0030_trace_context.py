"""Issue 30 item 5 (one trace): a notification keeps the W3C traceparent of the request that made it.

The worker's send span joins that trace (a child of the request, or of the job when the job is in it),
and the console's delivery log shows its trace id. NULL when tracing is off (no cost: nothing stored).

Revision ID: 0030_trace_context
Revises: 0029_chat_templates
Create Date: 2026-12-09
"""

import sqlalchemy as sa
from alembic import op

revision = "0030_trace_context"
down_revision = "0029_chat_templates"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("notifications", sa.Column("traceparent", sa.Text, nullable=True))


def downgrade():
    op.drop_column("notifications", "traceparent")
