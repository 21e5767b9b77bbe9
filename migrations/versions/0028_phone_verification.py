"""SMS for members (issue 29): verifying a number on the preferences page, and types that skip quiet hours.

phone_verifications holds each member's one code in flight, keyed by user_id like every per-user table (0016):
the number it was sent to (not yet the member's), a random seed from which the code is derived with the
server's key (so the code itself is stored nowhere), the tries left, when it expires, and the SMS ledger row
that carries it (delivery_id; the SMS channel sends a row of the built-in phone_verification type only to the
number of the verification that names that row). notification_types.bypass_quiet_hours: the type's messages
go out during the member's quiet hours on every channel (sign-in codes); other SMS wait for them to end.

Revision ID: 0028_phone_verification
Revises: 0027_sms_status_replies
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0028_phone_verification"
down_revision = "0027_sms_status_replies"
branch_labels = None
depends_on = None


def upgrade():
    tz = sa.DateTime(timezone=True)
    op.add_column(
        "notification_types", sa.Column("bypass_quiet_hours", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.create_table(
        "phone_verifications",
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("phone", sa.Text(), nullable=False),
        sa.Column("seed", sa.LargeBinary(), nullable=False),
        sa.Column("tries_left", sa.SmallInteger(), nullable=False),
        sa.Column("expires_at", tz, nullable=False),
        sa.Column("delivery_id", sa.BigInteger()),
        sa.Column("created_at", tz, server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("user_id"),
        sa.CheckConstraint(r"phone ~ '^\+[1-9][0-9]{6,14}$'", name="phone_verifications_e164"),
        sa.CheckConstraint("tries_left >= 0", name="phone_verifications_tries"),
    )


def downgrade():
    op.drop_table("phone_verifications")
    op.drop_column("notification_types", "bypass_quiet_hours")
