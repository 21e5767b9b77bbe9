"""Console II: a campaign keeps its audience report; the ledger gets time and dead-letter indexes.

`notification_deliveries_created_idx` serves the dashboard's windows (last hour, last day, per
minute) and the delivery log's time filter without scanning the whole ledger every refresh.
`notification_deliveries_failed_idx` holds only the dead-letter queue, so the DLQ page, its size
and a bulk replay walk DLQ rows only. (On a large live table, build both CONCURRENTLY by hand first.)

Revision ID: 0006_ledger_indexes
Revises: 0005_campaign_tables
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006_ledger_indexes"
down_revision = "0005_campaign_tables"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("campaigns", sa.Column("audience_report", postgresql.JSONB(), nullable=True))
    op.create_index("notification_deliveries_created_idx", "notification_deliveries", ["created_at"])
    op.create_index(
        "notification_deliveries_failed_idx",
        "notification_deliveries",
        ["id"],
        postgresql_where=sa.text("status = 'failed'"),
    )


def downgrade():
    op.drop_index("notification_deliveries_failed_idx", table_name="notification_deliveries")
    op.drop_index("notification_deliveries_created_idx", table_name="notification_deliveries")
    op.drop_column("campaigns", "audience_report")
