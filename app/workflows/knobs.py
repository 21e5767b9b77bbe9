"""The workflow that does what a type's older timing columns did: each type's first published version.

Migration 0032 writes the same steps in SQL for the types that existed then; this is the one rule in Python,
used for types created since by code that still sets those columns (tests' factories, Hato's own types).
"""

from __future__ import annotations

from collections.abc import Mapping

from app.delivery.channels import routable_names
from app.workflows.definition import Workflow, parse


def workflow_from_columns(t: Mapping) -> Workflow:
    """The steps a type row's escalate_after/unless, skip_when_online, push_when_offline, caps, aggregation
    window, e-mail frequency and channel order mean: in-app at once, then (after the escalation's delay, only if
    still unread or unseen) each channel in order, e-mail in the digest when that is the default."""
    steps: list[dict] = []
    if t.get("aggregation_window"):
        steps.append({"kind": "batch", "window": t["aggregation_window"]})
    if t.get("cap_count") and t.get("cap_window"):
        steps.append({"kind": "throttle", "count": t["cap_count"], "window": t["cap_window"]})
    steps.append({"kind": "channel", "channel": "in_app"})
    only_if = []
    if t.get("escalate_after"):
        steps.append({"kind": "delay", "seconds": t["escalate_after"]})
        only_if.append("unseen" if t.get("escalate_unless") == "seen" else "unread")
    if t.get("skip_when_online"):
        only_if.append("offline")
    frequency = t.get("email_frequency") or "immediate"
    for channel in t.get("channels") or routable_names():
        step: dict = {"kind": "channel", "channel": channel}
        if channel == "email" and frequency != "immediate":
            step = {"kind": "digest", "frequency": frequency}
        if only_if:
            step["only_if"] = list(only_if)
        if channel == "push" and t.get("push_when_offline"):
            step["wait_for_tab"] = True
        steps.append(step)
    return parse({"steps": steps})
