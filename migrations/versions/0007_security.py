"""Security hardening: API key scopes, the key that created a notification, a session version per user.

Keys that exist before this migration keep every scope, so an upgrade breaks no integration; new
keys get only `notifications:write` unless more are asked for (app/api_keys/scopes.py). Operators
narrow old keys in the console. `users.session_version` is bumped by "sign out everywhere" and by a
password or role change; a session cookie that carries an older version is refused.

Revision ID: 0007_security
Revises: 0006_ledger_indexes
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007_security"
down_revision = "0006_ledger_indexes"
branch_labels = None
depends_on = None

ALL_SCOPES = "{notifications:write,notifications:read,users:write,links:create}"


def upgrade():
    op.add_column(
        "api_keys",
        sa.Column(
            "scopes",
            postgresql.ARRAY(sa.Text()),
            nullable=False,
            server_default=sa.text("'{notifications:write}'::text[]"),
        ),
    )
    op.execute(f"UPDATE api_keys SET scopes = '{ALL_SCOPES}'::text[]")
    op.add_column(
        "notifications",
        sa.Column("api_key_id", sa.BigInteger(), sa.ForeignKey("api_keys.id", ondelete="SET NULL"), nullable=True),
    )
    op.add_column("users", sa.Column("session_version", sa.Integer(), nullable=False, server_default="0"))
    # Sign-in link responses were kept for 24 h in clear; they are never stored now (app/api/idempotency.py).
    op.execute("UPDATE idempotency_keys SET response_body = NULL WHERE path LIKE '/v1/users/%/login-links'")


def downgrade():
    op.drop_column("users", "session_version")
    op.drop_column("notifications", "api_key_id")
    op.drop_column("api_keys", "scopes")
