"""push_receivers: who can get a push at all (a browser or a phone that is neither turned off nor refused).

A view, so that the ingest's statement names it in a few bytes (psycopg caches the parsing of statements
under 4 KB only, tests/notify/test_statement_size.py) and the rule has one home. PostgreSQL inlines it: the
EXISTS probes each table's user_id index.

Revision ID: 0022_push_receivers
Revises: 0021_mobile_templates
Create Date: 2026-12-02
"""

from alembic import op

revision = "0022_push_receivers"
down_revision = "0021_mobile_templates"
branch_labels = None
depends_on = None


def upgrade():
    op.execute(
        """
CREATE VIEW push_receivers AS
SELECT user_id FROM push_subscriptions WHERE invalidated_at IS NULL AND disabled_at IS NULL
UNION ALL
SELECT user_id FROM devices WHERE invalidated_at IS NULL AND disabled_at IS NULL
"""
    )


def downgrade():
    op.execute("DROP VIEW push_receivers")
