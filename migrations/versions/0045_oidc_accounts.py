"""Console sign-in with OpenID Connect (issue 33): oidc_accounts (issuer, subject) → user_id.

An account is created on a person's first sign-in through the provider and found by this link afterwards
(never by e-mail alone, which a provider may let its users change). user_id cascades: a user deleted takes its
links along.

Revision ID: 0045_oidc_accounts
Revises: 0044_operator_content_locales
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0045_oidc_accounts"
down_revision = "0044_operator_content_locales"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "oidc_accounts",
        sa.Column("issuer", sa.Text(), primary_key=True),
        sa.Column("subject", sa.Text(), primary_key=True),
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("last_sign_in_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )
    op.create_index("ix_oidc_accounts_user_id", "oidc_accounts", ["user_id"])


def downgrade():
    op.drop_table("oidc_accounts")
