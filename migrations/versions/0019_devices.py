"""The device registry (issue 28): devices, each member's phones with their APNs or FCM token.

Keyed (id, user_id) and unique per (user_id, platform, token), as every per-user table (0016): a token
that another member registers moves to them under the registration's lock (app/devices/service.py),
found through devices_token_idx.

Revision ID: 0019_devices
Revises: 0018_channel_routing
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0019_devices"
down_revision = "0018_channel_routing"
branch_labels = None
depends_on = None


def upgrade():
    tz = sa.DateTime(timezone=True)
    op.create_table(
        "devices",
        sa.Column("id", sa.BigInteger, sa.Identity(always=True), nullable=False),
        sa.Column("user_id", sa.BigInteger, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("platform", sa.Text, nullable=False),
        sa.Column("token", sa.Text, nullable=False),
        sa.Column("app_id", sa.String(255)),
        sa.Column("app_version", sa.String(64)),
        sa.Column("locale", sa.String(35)),
        sa.Column("timezone", sa.Text),
        sa.Column("created_at", tz, nullable=False, server_default=sa.func.now()),
        sa.Column("last_seen_at", tz, nullable=False, server_default=sa.func.now()),
        sa.Column("last_sent_at", tz),
        sa.Column("disabled_at", tz),
        sa.Column("invalidated_at", tz),
        sa.Column("invalid_reason", sa.Text),
        sa.PrimaryKeyConstraint("id", "user_id", name="devices_pkey"),
        sa.UniqueConstraint("user_id", "platform", "token", name="devices_user_token"),
        sa.CheckConstraint("platform IN ('ios', 'android')", name="devices_platform"),
        sa.CheckConstraint("char_length(token) BETWEEN 1 AND 4096", name="devices_token_length"),
    )
    op.create_index("devices_token_idx", "devices", ["token"])


def downgrade():
    op.drop_table("devices")
