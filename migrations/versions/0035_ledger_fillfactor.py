"""The ledger keeps room on each page for its rows' updates (fillfactor 80).

A ledger row is updated several times in its life (stamped by the sweeper when a workflow step or a retry falls
due, claimed, recorded). The stamp changes no indexed column, so with room on its page PostgreSQL updates it in
place (a HOT update) instead of adding an entry to each of the ledger's ten indexes: bench_workflow's release of
due steps (issue 31) halved its buffer traffic. New pages get the room; existing ones as they are rewritten
(VACUUM FULL or pg_repack, at a quiet hour, if wanted).

Revision ID: 0035_ledger_fillfactor
Revises: 0034_user_properties
Create Date: 2026-12-03
"""

from alembic import op

revision = "0035_ledger_fillfactor"
down_revision = "0034_user_properties"
branch_labels = None
depends_on = None


def upgrade():
    op.execute("ALTER TABLE notification_deliveries SET (fillfactor = 80)")


def downgrade():
    op.execute("ALTER TABLE notification_deliveries RESET (fillfactor)")
