"""A workflow compiled for the engine: the type's columns that work per type, and a plan row per sending step.

The ingest statements read the plan rows (workflow_steps) to give each ledger row its due time, what cancels it
(read / seen) and its step; the engine's re-check reads the step's rules and condition when the row is due.
What works per type (the batch window, the throttle, the digest's default frequency, the order of channels, and
whether the inbox shows it) stays in the type's columns, which the ingest already reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.workflows.definition import Step, Workflow


@dataclass(frozen=True)
class PlannedStep:
    """What the engine needs of one sending step (a workflow_steps row)."""

    position: int
    channel: str
    waits: list[dict] | None  # the delays before it, in order (None: due when accepted)
    unless: str | None  # read | seen: reading (or seeing) the notification first cancels it
    if_offline: bool  # skipped (reason online) while a tab of the member acks
    wait_for_tab: bool  # push: held for the in-app frame's ack, skipped if a tab showed it
    condition: str | None  # CEL that must hold when it is due
    exits: list[str]  # conditions of the exit steps before it: one that holds when it is due ends the run


@dataclass(frozen=True)
class Compiled:
    """The type's columns and the plan rows of one workflow version."""

    columns: dict
    steps: list[PlannedStep]


def compile_workflow(workflow: Workflow) -> Compiled:
    """Plan workflow for the engine."""
    waits: list[dict] = []
    exits: list[str] = []
    planned: list[PlannedStep] = []
    for position, step in enumerate(workflow.steps, 1):
        if step.kind == "delay":
            waits.append(_wait(step))
        elif step.kind == "exit" and step.condition is not None:
            exits.append(step.condition)
        elif step.delivery_channel is not None:
            planned.append(_planned(position, step, waits, exits))
    by_kind = {step.kind: step for step in workflow.steps}
    batch, throttle, digest = by_kind.get("batch"), by_kind.get("throttle"), by_kind.get("digest")
    columns = {
        "channels": [p.channel for p in planned],
        "in_app_step": workflow.has_in_app(),
        "aggregation_window": batch.window if batch else None,
        "cap_count": throttle.count if throttle else None,
        "cap_window": throttle.window if throttle else None,
        "email_frequency": digest.frequency if digest else "immediate",
        **_summary(planned),
    }
    return Compiled(columns, planned)


def _wait(step: Step) -> dict:
    if step.seconds is not None:
        return {"seconds": step.seconds}
    if step.until is not None:
        return {"until": step.until}
    return {"local_time": step.local_time}


def _planned(position: int, step: Step, waits: list[dict], exits: list[str]) -> PlannedStep:
    unless = "read" if "unread" in step.only_if else "seen" if "unseen" in step.only_if else None
    return PlannedStep(
        position=position,
        channel=step.delivery_channel,
        waits=list(waits) or None,
        unless=unless,
        if_offline="offline" in step.only_if,
        wait_for_tab=step.wait_for_tab,
        condition=step.condition,
        exits=list(exits),
    )


def _summary(planned: list[PlannedStep]) -> dict:
    """The type's older timing columns, where one value says it for every step (the type list shows them; a
    ledger row without a step, written before workflows, still reads them)."""
    waits = {repr(p.waits) for p in planned}
    unless = {p.unless for p in planned}
    seconds = None
    if len(waits) == 1 and len(unless) == 1 and planned[0].waits and all("seconds" in w for w in planned[0].waits):
        seconds = sum(w["seconds"] for w in planned[0].waits)
    return {
        "escalate_after": seconds if seconds and planned[0].unless else None,
        "escalate_unless": planned[0].unless if seconds and planned[0].unless else "read",
        "skip_when_online": bool(planned) and all(p.if_offline for p in planned),
        "push_when_offline": any(p.wait_for_tab for p in planned),
    }
