"""Members' properties (issue 31): what the product says of a member, for workflow conditions (recipient.properties).

users.properties: a JSON object set with PUT /v1/users/<id> (replaced whole), at most limits.PROPERTIES_MAX_BYTES.

Revision ID: 0034_user_properties
Revises: 0033_workflow_chains
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0034_user_properties"
down_revision = "0033_workflow_chains"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("users", sa.Column("properties", JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False))


def downgrade():
    op.drop_column("users", "properties")
