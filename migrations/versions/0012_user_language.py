"""A user's language is a choice: users.locale is NULL until the user (or the product's API) sets one.

Until then pages follow the browser's Accept-Language and e-mail the DEFAULT_LOCALE. Existing rows
keep the value they have; only the column's default and NOT NULL go.

Revision ID: 0012_user_language
Revises: 0011_digests
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_user_language"
down_revision = "0011_digests"
branch_labels = None
depends_on = None


def upgrade():
    op.alter_column("users", "locale", existing_type=sa.Text(), nullable=True, server_default=None)


def downgrade():
    op.execute("UPDATE users SET locale = 'en' WHERE locale IS NULL")
    op.alter_column("users", "locale", existing_type=sa.Text(), nullable=False, server_default="en")
