"""A browser's pushes can be turned off from preferences, as a phone's can (issue 28: settings per device).

push_subscriptions gains disabled_at: the member turned pushes to that browser off without removing it.

Revision ID: 0020_push_subscription_switch
Revises: 0019_devices
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0020_push_subscription_switch"
down_revision = "0019_devices"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("push_subscriptions", sa.Column("disabled_at", sa.DateTime(timezone=True)))


def downgrade():
    op.drop_column("push_subscriptions", "disabled_at")
