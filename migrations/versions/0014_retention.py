"""Retention (issue 18): what the retention sweep needs to delete old rows in small keyset batches.

Revision ID: 0014_retention
Revises: 0013_provider_events
Create Date: 2026-11-30
"""

revision = "0014_retention"
down_revision = "0013_provider_events"
branch_labels = None
depends_on = None


def upgrade():
    pass


def downgrade():
    pass
