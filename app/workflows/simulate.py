"""The test run: what a workflow would do, step by step and when, for a sample payload and a member; sends nothing.

It applies the rules the engine applies when a step is due (app/delivery/policy.py): the member's preference
and whether the channel can reach them, the exits before the step, the step's condition, whether the
notification is still unread or unseen, quiet hours. What it cannot know in advance it assumes and says so:
the member reads the notification at `read_after` seconds (never, by default) and is offline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta

from app.delivery.policy import quiet_until
from app.timezones import zone
from app.workflows import conditions
from app.workflows.definition import Step, Workflow


@dataclass(frozen=True)
class Member:
    """What the test run knows of the member."""

    external_id: str | None
    locale: str | None
    timezone: str
    quiet_hours_start: time | None = None
    quiet_hours_end: time | None = None
    channels_on: frozenset[str] = frozenset()  # channels the member has on for the type (preferences resolved)
    reachable: frozenset[str] = frozenset()  # channels with somewhere to go (an address, a number, a device…)
    properties: dict = field(default_factory=dict)  # what the product said of the member (PUT /v1/users)


@dataclass(frozen=True)
class Outcome:
    """One step of the test run: what happens (sent, skipped, waits, exits, not reached, applies) and when."""

    position: int
    kind: str
    outcome: str
    at: datetime | None
    channel: str | None = None
    reason: str | None = None  # why skipped or not reached (a rule, or the condition and its error)
    detail: dict = field(default_factory=dict)


def next_local_time(after: datetime, hhmm: str, tz_name: str | None) -> datetime:
    """The member's next local HH:MM after `after` (the SQL function workflow_wait's rule)."""
    tz = zone(tz_name)
    local = after.astimezone(tz)
    hour, minute = (int(part) for part in hhmm.split(":"))
    candidate = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if candidate <= local:
        candidate = (local + timedelta(days=1)).replace(hour=hour, minute=minute, second=0, microsecond=0)
    return candidate.astimezone(UTC)


def payload_time(data: dict, path: str) -> datetime | None:
    """The time at `data.a.b` (ISO 8601), or None when it is missing or not a time (then the delay waits nothing)."""
    value: object = data
    for part in path.split(".")[1:]:
        value = value.get(part) if isinstance(value, dict) else None
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def after_delay(at: datetime, step: Step, data: dict, tz_name: str | None) -> datetime:
    """When a delay step that starts at `at` ends."""
    if step.seconds is not None:
        return at + timedelta(seconds=step.seconds)
    if step.until is not None:
        until = payload_time(data, step.until)
        return max(at, until) if until else at
    return next_local_time(at, step.local_time, tz_name)


def run(workflow: Workflow, data: dict, member: Member, now: datetime, read_after: float | None = None) -> list:
    """The test run's outcome for every step, in order."""
    at, exits, ended = now, [], False
    read_at = now + timedelta(seconds=read_after) if read_after is not None else None
    outcomes: list[Outcome] = []
    for position, step in enumerate(workflow.steps, 1):
        if ended:
            outcomes.append(Outcome(position, step.kind, "not_reached", None, step.delivery_channel or step.channel))
            continue
        if step.kind == "delay":
            at = after_delay(at, step, data, member.timezone)
            outcomes.append(Outcome(position, "delay", "waits", at))
        elif step.kind == "exit":
            holds, why = (True, None) if step.condition is None else conditions.explain(
                step.condition, _context(data, member, read_at, at))  # fmt: skip
            ended = holds
            outcomes.append(Outcome(position, "exit", "exits" if holds else "continues", at, reason=why))
            exits.append(step)
        elif step.kind in ("batch", "throttle"):
            outcomes.append(Outcome(position, step.kind, "applies", at,
                                    detail={"window": step.window, "count": step.count}))  # fmt: skip
        elif step.kind == "channel" and step.channel == "in_app":
            shown = "in_app" in member.channels_on
            outcomes.append(Outcome(position, "channel", "shown" if shown else "skipped", at, "in_app",
                                    None if shown else "preference_off"))  # fmt: skip
        else:
            outcomes.append(_sending(position, step, data, member, at, read_at))
    return outcomes


def _sending(position: int, step: Step, data: dict, member: Member, at: datetime, read_at: datetime | None):
    channel = step.delivery_channel
    context = _context(data, member, read_at, at)
    reason = None
    if channel not in member.channels_on:
        reason = "preference_off"
    elif channel not in member.reachable:
        reason = f"no_{channel}_target"
    elif read_at is not None and read_at <= at and ("unread" in step.only_if or "unseen" in step.only_if):
        reason = "read"
    elif step.condition is not None:
        holds, why = conditions.explain(step.condition, context)
        if not holds:
            reason = "condition" if why is None else f"condition: {why}"
    if reason:
        return Outcome(position, step.kind, "skipped", at, channel, reason)
    if step.kind == "digest":
        return Outcome(position, "digest", "digested", at, channel, detail={"frequency": step.frequency})
    later = quiet_until(at, member.timezone, member.quiet_hours_start, member.quiet_hours_end)
    if later is not None:
        return Outcome(position, step.kind, "sent", later, channel, "quiet_hours")
    return Outcome(position, step.kind, "sent", at, channel)


def _context(data: dict, member: Member, read_at: datetime | None, at: datetime) -> dict:
    read = read_at is not None and read_at <= at
    return conditions.context(data, vars(member), read=read, seen=read)
