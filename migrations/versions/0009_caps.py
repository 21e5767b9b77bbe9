"""Frequency caps: one row per e-mail/push admitted under its type's cap, counted per (user, type, channel).

The engine admits a capped delivery by inserting its row here while it holds a transaction-scoped
advisory lock on (user, type, channel), so two workers can never both take the last slot. A row whose
send later fails still counts: the cap limits attempts to reach the user, not successes.

Revision ID: 0009_caps
Revises: 0008_timing
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_caps"
down_revision = "0008_timing"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "delivery_cap_uses",
        sa.Column(
            "delivery_id",
            sa.BigInteger(),
            sa.ForeignKey("notification_deliveries.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index("delivery_cap_uses_window_idx", "delivery_cap_uses", ["user_id", "type", "channel", "used_at"])


def downgrade():
    op.drop_index("delivery_cap_uses_window_idx", table_name="delivery_cap_uses")
    op.drop_table("delivery_cap_uses")
