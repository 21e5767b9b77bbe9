"""A push row remembers which of its targets already took it, so a retry goes only to the others.

One push row goes to every browser and phone of its member. When some of them took it and the others
could not be tried (their part paused, their service's breaker open) or failed for now, the row waits
for those alone: `reached` holds the endpoints and device tokens that have it, and the next try leaves
them out, so nobody gets it twice and nobody loses it.

Revision ID: 0023_delivery_reached
Revises: 0022_push_receivers
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0023_delivery_reached"
down_revision = "0022_push_receivers"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("notification_deliveries", sa.Column("reached", postgresql.ARRAY(sa.Text())))


def downgrade():
    op.drop_column("notification_deliveries", "reached")
