"""Chat (issue 29): each member's channel data per chat provider.

chat_accounts holds what the product set through PUT /v1/users/<id>/channel-data/<provider> (a Slack channel
or webhook URL, a Teams or Discord webhook URL, a LINE user id), keyed (user_id, provider) like every per-user
table (0016). A provider's permanent refusal invalidates a row with its reason instead of deleting it, so the
member and the console can see why chat stopped. (No born-skip function like sms_reachable (0025): its branch
would take the ingest's statement past psycopg's 4 KB parse cache, so the engine skips members without one.)

Revision ID: 0026_chat_accounts
Revises: 0025_sms_channel
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0026_chat_accounts"
down_revision = "0025_sms_channel"
branch_labels = None
depends_on = None

CHAT_PROVIDERS = ("slack", "msteams", "discord", "line")


def upgrade():
    tz = sa.DateTime(timezone=True)
    op.create_table(
        "chat_accounts",
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("provider", sa.Text(), nullable=False),
        sa.Column("data", JSONB(), nullable=False),
        sa.Column("created_at", tz, server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", tz, server_default=sa.func.now(), nullable=False),
        sa.Column("invalidated_at", tz),
        sa.Column("invalid_reason", sa.Text()),
        sa.PrimaryKeyConstraint("user_id", "provider"),
        sa.CheckConstraint(f"provider IN {CHAT_PROVIDERS!r}", name="chat_accounts_provider"),
    )


def downgrade():
    op.drop_table("chat_accounts")
