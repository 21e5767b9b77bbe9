"""A topic notification for a tenant (issue 32): topic_fanouts.tenant_id.

The fanout reaches the topic's followers who are the tenant's members, each row carrying the tenant (its
defaults, branding and scoped feeds apply as to the ingest's rows). No foreign key, as notifications.tenant_id:
a deleted tenant's fanouts keep its id, never reused.

Revision ID: 0046_topic_fanout_tenant
Revises: 0045_oidc_accounts
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0046_topic_fanout_tenant"
down_revision = "0045_oidc_accounts"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("topic_fanouts", sa.Column("tenant_id", sa.BigInteger()))


def downgrade():
    op.drop_column("topic_fanouts", "tenant_id")
