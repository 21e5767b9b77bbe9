"""Workflows (issue 31): each type's delivery plan as versioned steps, and the ledger rows that carry them out.

workflow_versions (immutable, published), workflow_drafts (one per type being edited), workflow_steps (the
engine's plan for each sending step of a version); notification_types.workflow_version_id (what is in force)
and in_app_step; notifications.workflow_version_id (what a notification runs); notification_deliveries
.workflow_step_id (the step a ledger row carries out). workflow_due() gives a step's due time from its delays.

Every existing type gets version 1, the steps its timing columns meant (the same rule as
app/workflows/knobs.py, frozen here for the channels of this revision).

Revision ID: 0032_workflows
Revises: 0031_push_when_offline
Create Date: 2026-12-03
"""

import json

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

revision = "0032_workflows"
down_revision = "0031_push_when_offline"
branch_labels = None
depends_on = None

ROUTABLE = ("email", "push", "sms", "chat")  # the channel registry's order at this revision
_tz = sa.DateTime(timezone=True)

# A step's due time: its delays one after another from `start` (the acceptance, or an aggregation window's end).
# A payload time that is missing or not a time waits nothing; a local time is the member's next HH:MM.
WORKFLOW_DUE = r"""
CREATE FUNCTION workflow_wait(start timestamptz, waits jsonb, data jsonb, member bigint) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
  due timestamptz := start;
  w jsonb;
  raw text;
  tz text;
  local timestamp;
BEGIN
  IF waits IS NULL THEN
    RETURN start;
  END IF;
  FOR w IN SELECT value FROM jsonb_array_elements(waits) LOOP
    IF w ? 'seconds' THEN
      due := due + make_interval(secs => (w ->> 'seconds')::int);
    ELSIF w ? 'until' THEN
      raw := data #>> string_to_array(substr(w ->> 'until', 6), '.');
      IF raw ~ '^\d{4}-\d{2}-\d{2}' THEN
        BEGIN
          due := GREATEST(due, raw::timestamptz);
        EXCEPTION WHEN others THEN
          NULL;
        END;
      END IF;
    ELSIF w ? 'local_time' THEN
      SELECT coalesce(u.timezone, 'UTC') INTO tz FROM users u WHERE u.id = member;
      local := date_trunc('day', due AT TIME ZONE coalesce(tz, 'UTC')) + (w ->> 'local_time')::time;
      IF local <= due AT TIME ZONE coalesce(tz, 'UTC') THEN
        local := local + interval '1 day';
      END IF;
      due := local AT TIME ZONE coalesce(tz, 'UTC');
    END IF;
  END LOOP;
  RETURN due;
END
$$
"""
# What the ingest statements call: plain SQL, so the planner inlines it and a step without delays costs no call.
WORKFLOW_DUE_INLINE = """
CREATE FUNCTION workflow_due(start timestamptz, waits jsonb, data jsonb, member bigint) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN waits IS NULL THEN start ELSE workflow_wait(start, waits, data, member) END
$$
"""


def upgrade():
    op.create_table(
        "workflow_versions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column("type", sa.Text(), sa.ForeignKey("notification_types.type", ondelete="CASCADE"), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("steps", JSONB(), nullable=False),
        sa.Column("note", sa.Text(), server_default="", nullable=False),
        sa.Column("restored_from", sa.Integer()),
        sa.Column("published_by", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="SET NULL")),
        sa.Column("published_at", _tz, server_default=sa.func.now(), nullable=False),
        sa.UniqueConstraint("type", "version", name="workflow_versions_type_version"),
    )
    op.create_table(
        "workflow_drafts",
        sa.Column("type", sa.Text(), sa.ForeignKey("notification_types.type", ondelete="CASCADE"), primary_key=True),
        sa.Column("steps", JSONB(), nullable=False),
        sa.Column("updated_by", sa.BigInteger(), sa.ForeignKey("users.id", ondelete="SET NULL")),
        sa.Column("updated_at", _tz, server_default=sa.func.now(), nullable=False),
    )
    op.create_table(
        "workflow_steps",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), primary_key=True),
        sa.Column(
            "version_id", sa.BigInteger(), sa.ForeignKey("workflow_versions.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("position", sa.SmallInteger(), nullable=False),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("waits", JSONB()),
        sa.Column("unless", sa.Text()),
        sa.Column("if_offline", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("wait_for_tab", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("condition", sa.Text()),
        sa.Column("exits", ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.UniqueConstraint("version_id", "channel", name="workflow_steps_channel"),
        sa.CheckConstraint("unless IS NULL OR unless IN ('read', 'seen')", name="workflow_steps_unless"),
    )
    op.add_column(
        "notification_types",
        sa.Column(
            "workflow_version_id",
            sa.BigInteger(),
            sa.ForeignKey("workflow_versions.id", name="notification_types_workflow_version"),
        ),
    )
    op.add_column(
        "notification_types", sa.Column("in_app_step", sa.Boolean(), server_default=sa.true(), nullable=False)
    )
    op.add_column("notifications", sa.Column("workflow_version_id", sa.BigInteger()))
    op.add_column("notification_deliveries", sa.Column("workflow_step_id", sa.BigInteger()))
    op.execute(WORKFLOW_DUE)
    op.execute(WORKFLOW_DUE_INLINE)
    _first_versions()


def _first_versions():
    bind = op.get_bind()
    types = bind.execute(
        sa.text(
            "SELECT type, escalate_after, escalate_unless, skip_when_online, push_when_offline, cap_count, cap_window,"
            " aggregation_window, email_frequency, channels FROM notification_types ORDER BY type"
        )
    ).mappings()
    for t in list(types):
        steps, planned = _steps(t)
        version_id = bind.execute(
            sa.text(
                "INSERT INTO workflow_versions (type, version, steps, note) "
                "VALUES (:type, 1, CAST(:steps AS jsonb), 'from the type''s settings (migration 0032)') RETURNING id"
            ),
            {"type": t["type"], "steps": json.dumps({"steps": steps})},
        ).scalar_one()
        for row in planned:
            bind.execute(
                sa.text(
                    "INSERT INTO workflow_steps (version_id, position, channel, waits, unless, if_offline,"
                    " wait_for_tab) VALUES (:v, :position, :channel, CAST(:waits AS jsonb), :unless, :if_offline,"
                    " :wait_for_tab)"
                ),
                {"v": version_id, **row},
            )
        bind.execute(
            sa.text("UPDATE notification_types SET workflow_version_id = :v WHERE type = :type"),
            {"v": version_id, "type": t["type"]},
        )


def _steps(t):
    steps, planned = [], []
    if t["aggregation_window"]:
        steps.append({"kind": "batch", "window": t["aggregation_window"]})
    if t["cap_count"] and t["cap_window"]:
        steps.append({"kind": "throttle", "count": t["cap_count"], "window": t["cap_window"]})
    steps.append({"kind": "channel", "channel": "in_app"})
    only_if, waits, unless = [], None, None
    if t["escalate_after"]:
        steps.append({"kind": "delay", "seconds": t["escalate_after"]})
        unless = "seen" if t["escalate_unless"] == "seen" else "read"
        only_if.append("unseen" if unless == "seen" else "unread")
        waits = json.dumps([{"seconds": t["escalate_after"]}])
    if t["skip_when_online"]:
        only_if.append("offline")
    for channel in t["channels"] or ROUTABLE:
        step = {"kind": "channel", "channel": channel}
        if channel == "email" and t["email_frequency"] != "immediate":
            step = {"kind": "digest", "frequency": t["email_frequency"]}
        if only_if:
            step["only_if"] = list(only_if)
        tab = channel == "push" and t["push_when_offline"]
        if tab:
            step["wait_for_tab"] = True
        steps.append(step)
        planned.append(
            {
                "position": len(steps),
                "channel": channel,
                "waits": waits,
                "unless": unless,
                "if_offline": bool(t["skip_when_online"]),
                "wait_for_tab": bool(tab),
            }
        )
    return steps, planned


def downgrade():
    op.execute("DROP FUNCTION workflow_due(timestamptz, jsonb, jsonb, bigint)")
    op.execute("DROP FUNCTION workflow_wait(timestamptz, jsonb, jsonb, bigint)")
    op.drop_column("notification_deliveries", "workflow_step_id")
    op.drop_column("notifications", "workflow_version_id")
    op.drop_column("notification_types", "in_app_step")
    op.drop_column("notification_types", "workflow_version_id")
    op.drop_table("workflow_steps")
    op.drop_table("workflow_drafts")
    op.drop_table("workflow_versions")
