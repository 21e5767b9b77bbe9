"""The SMS channel (issue 29): who can get an SMS at all, and each type's limit on a message's parts.

sms_receivers is a view (as push_receivers, 0022): a member with a number that is verified, not refused by
a provider, and with consent in force. sms_reachable(user_id) and push_reachable(user_id) ask the views for
one member in a few bytes (SQL functions PostgreSQL inlines into an EXISTS), so the ingest's statement,
which names every channel's born-skip rule, stays under psycopg's 4 KB parse cache.
notification_types.sms_max_segments caps one SMS's parts (GSM-7: 153 characters each once split; UCS-2:
67): a rendering over it fails for good.

Revision ID: 0025_sms_channel
Revises: 0024_sms_phone
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0025_sms_channel"
down_revision = "0024_sms_phone"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column(
        "notification_types", sa.Column("sms_max_segments", sa.SmallInteger(), server_default="3", nullable=False)
    )
    op.create_check_constraint(
        "notification_types_sms_max_segments", "notification_types", "sms_max_segments BETWEEN 1 AND 10"
    )
    op.execute(
        """
CREATE VIEW sms_receivers AS
SELECT id AS user_id FROM users
WHERE phone IS NOT NULL AND phone_verified_at IS NOT NULL AND phone_invalidated_at IS NULL AND sms_opt_in
"""
    )
    for kind in ("sms", "push"):
        op.execute(
            f"""
CREATE FUNCTION {kind}_reachable(member bigint) RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT EXISTS (SELECT FROM {kind}_receivers r WHERE r.user_id = member) $$
"""
        )


def downgrade():
    op.execute("DROP FUNCTION push_reachable(bigint)")
    op.execute("DROP FUNCTION sms_reachable(bigint)")
    op.execute("DROP VIEW sms_receivers")
    op.drop_constraint("notification_types_sms_max_segments", "notification_types")
    op.drop_column("notification_types", "sms_max_segments")
