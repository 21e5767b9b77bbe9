"""A scoped feed's own last-seen time (issue 32): tenant_last_seen (user_id, tenant_id, seen_at).

A tenant-scoped bell that opens records the time for that tenant only, so the member's other bells (another
tenant's, or Hato's own inbox) keep their unseen counts; a scope's unseen count reads the later of this and the
member's own notification_last_seen (opening Hato's inbox sees everything). user_id first, the distribution key
(0016); both foreign keys cascade, so a member or a tenant deleted takes its rows along.

Revision ID: 0040_tenant_last_seen
Revises: 0039_topics
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0040_tenant_last_seen"
down_revision = "0039_topics"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "tenant_last_seen",
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("tenant_id", sa.BigInteger(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade():
    op.drop_table("tenant_last_seen")
