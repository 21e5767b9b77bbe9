"""SMS (issue 29): a member's phone number and their consent to SMS, with its history.

users.phone is E.164 (phonenumbers); phone_verified_at says it was verified (a code the member typed, or the
product's server vouching for it through the API); phone_invalidated_at / phone_invalid_reason are set when a
provider refuses the number for good (Twilio 21211). users.sms_opt_in is the consent in force, with when and
from where it came; sms_consents keeps every change (api, member, keyword), keyed with user_id like every
per-user table (0016).

Revision ID: 0024_sms_phone
Revises: 0023_delivery_reached
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0024_sms_phone"
down_revision = "0023_delivery_reached"
branch_labels = None
depends_on = None

CONSENT_SOURCES = ("api", "member", "keyword")


def upgrade():
    tz = sa.DateTime(timezone=True)
    op.add_column("users", sa.Column("phone", sa.Text()))
    op.add_column("users", sa.Column("phone_verified_at", tz))
    op.add_column("users", sa.Column("phone_invalidated_at", tz))
    op.add_column("users", sa.Column("phone_invalid_reason", sa.Text()))
    op.add_column("users", sa.Column("sms_opt_in", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.add_column("users", sa.Column("sms_opt_in_at", tz))
    op.add_column("users", sa.Column("sms_consent_source", sa.Text()))
    op.create_check_constraint("users_phone_e164", "users", r"phone ~ '^\+[1-9][0-9]{6,14}$'")
    op.create_check_constraint("users_sms_consent_source", "users", f"sms_consent_source IN {CONSENT_SOURCES!r}")
    op.create_index("users_phone_idx", "users", ["phone"], postgresql_where=sa.text("phone IS NOT NULL"))
    op.create_table(
        "sms_consents",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("user_id", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("phone", sa.Text()),
        sa.Column("opted_in", sa.Boolean(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text(), server_default="", nullable=False),
        sa.Column("created_at", tz, server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("id", "user_id"),
        sa.CheckConstraint(f"source IN {CONSENT_SOURCES!r}", name="sms_consents_source"),
    )


def downgrade():
    op.drop_table("sms_consents")
    op.drop_index("users_phone_idx", "users")
    op.drop_constraint("users_sms_consent_source", "users")
    op.drop_constraint("users_phone_e164", "users")
    for column in ("sms_consent_source", "sms_opt_in_at", "sms_opt_in", "phone_invalid_reason",
                   "phone_invalidated_at", "phone_verified_at", "phone"):  # fmt: skip
        op.drop_column("users", column)
