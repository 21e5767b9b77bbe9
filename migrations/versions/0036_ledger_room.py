"""The ledger's pages keep room for a whole page of stamps (fillfactor 55, was 80).

The sweeper stamps every due row it takes (updated_at, no indexed column), often most rows of a page at once: a
burst of workflow steps falling due together was written together. Within that one transaction the old versions
cannot be pruned yet, so each stamp needs room for its new version on the same page, or it becomes a non-HOT
update with an entry in each of the ledger's indexes (about 11 buffers a row instead of 1). With fillfactor F
and a share s of a page's rows stamped at once, the room (1 - F) holds them while F <= 1 / (1 + s): 0.55 for
bench_workflow's 80 % (issue 31: the other 20 %, read in time, were skipped before and their dead versions are
pruned first). At 80 about half of its stamps were non-HOT. The table takes about 1.45 times the pages at insert;
new pages get the room, existing ones as they are rewritten (VACUUM FULL or pg_repack, at a quiet hour).

Revision ID: 0036_ledger_room
Revises: 0035_ledger_fillfactor
Create Date: 2026-12-03
"""

from alembic import op

revision = "0036_ledger_room"
down_revision = "0035_ledger_fillfactor"
branch_labels = None
depends_on = None


def upgrade():
    op.execute("ALTER TABLE notification_deliveries SET (fillfactor = 55)")


def downgrade():
    op.execute("ALTER TABLE notification_deliveries SET (fillfactor = 80)")
