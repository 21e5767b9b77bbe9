"""API keys, idempotency records and one-time sign-in links.

Revision ID: 0002_api_tables
Revises: 0001_seed_schema
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002_api_tables"
down_revision = "0001_seed_schema"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade():
    op.create_table(
        "api_keys",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column("key_hash", sa.Text(), nullable=False),
        sa.Column("created_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("last_used_at", TZ, nullable=True),
        sa.Column("revoked_at", TZ, nullable=True),
        sa.Column(
            "created_by",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="SET NULL", name="fk_api_keys_created_by_users"),
            nullable=True,
        ),
        sa.UniqueConstraint("key_hash", name="uq_api_keys_key_hash"),
        sa.UniqueConstraint("prefix", name="uq_api_keys_prefix"),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column(
            "api_key_id",
            sa.BigInteger(),
            sa.ForeignKey("api_keys.id", ondelete="CASCADE", name="fk_idempotency_keys_api_key_id_api_keys"),
            nullable=False,
        ),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("method", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("request_hash", sa.Text(), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_body", postgresql.JSONB(), nullable=True),
        sa.Column("created_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("completed_at", TZ, nullable=True),
        sa.UniqueConstraint("api_key_id", "key", name="idempotency_keys_once"),
    )
    op.create_index("idempotency_keys_created_idx", "idempotency_keys", ["created_at"])
    op.create_table(
        "login_links",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column(
            "user_id",
            sa.BigInteger(),
            sa.ForeignKey("users.id", ondelete="CASCADE", name="fk_login_links_user_id_users"),
            nullable=False,
        ),
        sa.Column("token_hash", sa.Text(), nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
        sa.Column("used_at", TZ, nullable=True),
        sa.Column("created_at", TZ, server_default=sa.text("now()"), nullable=False),
        sa.UniqueConstraint("token_hash", name="uq_login_links_token_hash"),
    )
    op.create_index("ix_login_links_user_id", "login_links", ["user_id"])


def downgrade():
    for table in ("login_links", "idempotency_keys", "api_keys"):
        op.drop_table(table)
