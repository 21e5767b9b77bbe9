"""Kill switches: channel_switches (a paused channel, or one paused provider of it); digest runs held since.

A row in channel_switches pauses its channel (provider '') or one provider of it; deliveries wait
without a try meanwhile (app/delivery/switches.py). digest_runs gains held_since, as the ledger and the
webhook outbox have, so a digest held back longer than DELIVERY_MAX_AGE expires into failed as well.

Revision ID: 0017_channel_switches
Revises: 0016_distribution_keys
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0017_channel_switches"
down_revision = "0016_distribution_keys"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "channel_switches",
        sa.Column("channel", sa.Text, primary_key=True),
        sa.Column("provider", sa.Text, primary_key=True, server_default=""),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("paused_by", sa.BigInteger, sa.ForeignKey("users.id", ondelete="SET NULL")),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.add_column("digest_runs", sa.Column("held_since", sa.DateTime(timezone=True)))


def downgrade():
    op.drop_column("digest_runs", "held_since")
    op.drop_table("channel_switches")
