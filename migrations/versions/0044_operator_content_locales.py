"""Operator content in more than one language (issue 33): a `locales` jsonb on notification types and announcements.

Each holds the variants of the row's words per locale tag, beside the base text that stays the fallback:
notification_types.locales = {"ja": {"label": …, "description": …}}, announcements.locales = {"ja": {"title": …,
"body": …}}. A reader walks their locale chain (ja-jp → ja → DEFAULT_LOCALE) field by field (app/locales.py).
Both tables are small (one row per type, one per broadcast), so a column beats a table per variant: one read, no
join, and the API's `locales` object is the column as stored.

Revision ID: 0044_operator_content_locales
Revises: 0043_notification_actions
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0044_operator_content_locales"
down_revision = "0043_notification_actions"
branch_labels = None
depends_on = None


def upgrade():
    for table in ("notification_types", "announcements"):
        op.add_column(table, sa.Column("locales", JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False))


def downgrade():
    for table in ("notification_types", "announcements"):
        op.drop_column(table, "locales")
