"""A notification's run, step by step: entered, waited until, skipped (by which rule or condition), sent with its
delivery, failed, or still to come. Read off the version it was accepted under and its ledger rows (each names
its step), so the delivery log and GET /v1/notifications/<id> show the same story the engine lived.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import sqlalchemy as sa

from app.extensions import db
from app.workflows.definition import parse
from app.workflows.simulate import after_delay

# A ledger row's status, as a step's state in the run.
ROW_STATE = {"sent": "sent", "failed": "failed", "skipped": "skipped", "passed": "skipped", "sending": "sending",
             "standby": "standby"}  # fmt: skip

STEPS_SQL = sa.text("SELECT id, position FROM workflow_steps WHERE version_id = :version_id")
VERSION_SQL = sa.text("SELECT version, steps FROM workflow_versions WHERE id = :version_id")


@dataclass(frozen=True)
class TraceStep:
    """One step of a notification's run."""

    position: int
    kind: str
    state: str  # shown, hidden, waited, waiting, applied, sent, skipped, failed, pending, sending, standby,
    # not_sent (the member had the channel off: no ledger row), exited, continued, not_reached
    at: datetime | None = None
    channel: str | None = None
    reason: str | None = None
    condition: str | None = None
    delivery_id: int | None = None

    def as_json(self) -> dict:
        """The API's shape."""
        return {name: value for name, value in asdict(self).items()}


def notification_trace(n: Mapping, deliveries: list[Mapping], now: datetime | None = None) -> dict | None:
    """{version, steps} for notification n (with workflow_version_id, created_at, window_ends_at, in_app, data,
    timezone) and its ledger rows (with workflow_step_id); None for a notification from before workflows."""
    if n.get("workflow_version_id") is None:
        return None
    version = db.session.execute(VERSION_SQL, {"version_id": n["workflow_version_id"]}).one_or_none()
    if version is None:
        return None
    positions = dict(db.session.execute(STEPS_SQL, {"version_id": n["workflow_version_id"]}).tuples().all())
    by_position = {positions[d["workflow_step_id"]]: d for d in deliveries if d.get("workflow_step_id") in positions}
    steps = trace_steps(parse(version.steps), n, by_position, now or datetime.now(UTC))
    return {"version": version.version, "steps": [step.as_json() for step in steps]}


def trace_steps(workflow, n: Mapping, rows: dict[int, Mapping], now: datetime) -> list[TraceStep]:
    """The run of workflow for n, given its ledger rows by step position."""
    at = n.get("window_ends_at") or n["created_at"]
    out: list[TraceStep] = []
    exited_by = _exits_that_ended(workflow, rows)
    for position, step in enumerate(workflow.steps, 1):
        if exited_by is not None and position > exited_by and step.kind != "delay":
            row = rows.get(position)
            if row is None or row.get("skip_reason") == "workflow_exit":
                out.append(TraceStep(position, step.kind, "not_reached", channel=step.delivery_channel,
                                     reason="workflow_exit", delivery_id=row["id"] if row else None))  # fmt: skip
                continue
        if step.kind == "delay":
            at = after_delay(at, step, n.get("data") or {}, n.get("timezone"))
            out.append(TraceStep(position, "delay", "waited" if at <= now else "waiting", at))
        elif step.kind == "exit":
            state = "exited" if exited_by == position else "continued" if at <= now else "pending"
            out.append(TraceStep(position, "exit", state, at, condition=step.condition))
        elif step.kind in ("batch", "throttle"):
            out.append(TraceStep(position, step.kind, "applied", at))
        elif step.kind == "channel" and step.channel == "in_app":
            out.append(TraceStep(position, "channel", "shown" if n.get("in_app") else "hidden", at, "in_app"))
        else:
            out.append(_sending(position, step, rows.get(position), at, now))
    return out


def _exits_that_ended(workflow, rows: dict[int, Mapping]) -> int | None:
    """The position of the exit step that ended the run (its later rows were skipped as workflow_exit), if any."""
    ended = [p for p, row in rows.items() if row.get("skip_reason") == "workflow_exit"]
    if not ended:
        return None
    exits = [p for p, step in enumerate(workflow.steps, 1) if step.kind == "exit" and p < min(ended)]
    return exits[-1] if exits else None


def _sending(position: int, step, row: Mapping | None, at: datetime, now: datetime) -> TraceStep:
    channel = step.delivery_channel
    if row is None:
        return TraceStep(position, step.kind, "not_sent", at, channel, reason="preference_off")
    status = row["status"]
    reason = row.get("skip_reason") or row.get("error_kind")
    condition = step.condition if reason == "condition" else None
    if status == "pending":
        due = row["next_attempt_at"]
        state = "waiting" if due > now and not row.get("attempts") else "pending"
        return TraceStep(position, step.kind, state, due, channel, delivery_id=row["id"])
    when = row.get("sent_at") if status == "sent" else row.get("updated_at")
    return TraceStep(position, step.kind, ROW_STATE.get(status, status), when or at, channel, reason, condition,
                     row["id"])  # fmt: skip
