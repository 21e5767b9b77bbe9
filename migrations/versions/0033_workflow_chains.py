"""A "first" chain hands over to a workflow step that still waits: the next channel keeps its step's due time.

hato_route_next (0018) made the next channel of a chain due at once. A workflow step may wait (its delays:
issue 31), so the handed-over row is now due at the later of now and its own time; and a step skipped because
an exit ended the run (workflow_exit) closes the rest of the chain like read or cancelled do.

Revision ID: 0033_workflow_chains
Revises: 0032_workflows
Create Date: 2026-12-03
"""

from alembic import op

revision = "0033_workflow_chains"
down_revision = "0032_workflows"
branch_labels = None
depends_on = None

OLD_STOP = "ARRAY['cancelled', 'read', 'seen', 'online', 'digested', 'capped', 'muted', 'not_needed']"
NEW_STOP = "ARRAY['cancelled', 'read', 'seen', 'online', 'digested', 'capped', 'muted', 'not_needed', 'workflow_exit']"


def _function(stop_reasons: str, due: str) -> str:
    return f"""
CREATE OR REPLACE FUNCTION hato_route_next() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  next_id bigint;
BEGIN
  IF NEW.status = 'sent' OR (NEW.status = 'skipped' AND NEW.skip_reason = ANY({stop_reasons})) THEN
    UPDATE notification_deliveries
    SET status = 'skipped', updated_at = now(),
        skip_reason = CASE WHEN NEW.status = 'sent' THEN 'not_needed' ELSE NEW.skip_reason END
    WHERE notification_id = NEW.notification_id AND user_id = NEW.user_id AND status = 'standby';
  ELSE
    -- updated_at as it was: the sweeper's TAKE_DUE_SQL sees a row that fell due (now, or when its step is due).
    UPDATE notification_deliveries SET status = 'pending', next_attempt_at = {due}
    WHERE id = (SELECT id FROM notification_deliveries
                WHERE notification_id = NEW.notification_id AND user_id = NEW.user_id AND status = 'standby'
                ORDER BY route_rank LIMIT 1)
      AND user_id = NEW.user_id
    RETURNING id INTO next_id;
    IF next_id IS NOT NULL THEN
      NEW.status := 'passed';
    END IF;
  END IF;
  RETURN NEW;
END
$$
"""


def upgrade():
    op.execute(_function(NEW_STOP, "GREATEST(next_attempt_at, now())"))


def downgrade():
    op.execute(_function(OLD_STOP, "now()"))
