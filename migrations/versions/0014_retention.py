"""Retention (issue 18): what the retention sweep needs to delete old rows in small keyset batches.

app/retention walks each table oldest first in (created_at, id) order, one small transaction per
batch, so every batch is an index range scan that resumes exactly after the last row it looked at:
notifications get (created_at, id); the ledger's created index gains id as its second column (the
dashboard's created_at windows use it as before); provider events nobody's delivery matched are
pruned by received_at; announcement_reads gets (announcement_id, user_id) so the reads of one expired
announcement are deleted without a walk over everybody's reads. (On a large live database, build these
CONCURRENTLY by hand first.)

Revision ID: 0014_retention
Revises: 0013_provider_events
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_retention"
down_revision = "0013_provider_events"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index("notifications_created_idx", "notifications", ["created_at", "id"])
    op.drop_index("notification_deliveries_created_idx", table_name="notification_deliveries")
    op.create_index("notification_deliveries_created_idx", "notification_deliveries", ["created_at", "id"])
    op.create_index(
        "provider_events_unmatched_idx",
        "provider_events",
        ["received_at", "id"],
        postgresql_where=sa.text("delivery_id IS NULL"),
    )
    op.create_index("announcement_reads_announcement_idx", "announcement_reads", ["announcement_id", "user_id"])


def downgrade():
    op.drop_index("announcement_reads_announcement_idx", table_name="announcement_reads")
    op.drop_index("provider_events_unmatched_idx", table_name="provider_events")
    op.drop_index("notification_deliveries_created_idx", table_name="notification_deliveries")
    op.create_index("notification_deliveries_created_idx", "notification_deliveries", ["created_at"])
    op.drop_index("notifications_created_idx", table_name="notifications")
