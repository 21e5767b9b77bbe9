"""Quotas per API key (issue 32, seed 004): a rate (requests per second with a burst) and a daily quota.

NULL is no limit. The checks keep a bad value out whichever way it comes in (the console, the CLI, SQL).

Revision ID: 0037_quotas
Revises: 0036_ledger_room
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0037_quotas"
down_revision = "0036_ledger_room"
branch_labels = None
depends_on = None

CHECKS = {
    "api_keys_rate": "rate_per_second > 0 AND rate_per_second <= 1000000",
    "api_keys_burst": "rate_burst BETWEEN 1 AND 1000000",
    "api_keys_daily": "daily_quota BETWEEN 0 AND 1000000000000",
}


def upgrade():
    op.add_column("api_keys", sa.Column("rate_per_second", sa.Float(), nullable=True))
    op.add_column("api_keys", sa.Column("rate_burst", sa.Integer(), nullable=True))
    op.add_column("api_keys", sa.Column("daily_quota", sa.BigInteger(), nullable=True))
    for name, condition in CHECKS.items():
        op.create_check_constraint(name, "api_keys", condition)


def downgrade():
    for column in ("daily_quota", "rate_burst", "rate_per_second"):
        op.drop_column("api_keys", column)
