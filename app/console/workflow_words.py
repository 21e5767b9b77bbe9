"""How the workflow pages (test run, history, a notification's run) name steps, outcomes, states and reasons.

The test run (app/workflows/simulate.py) and the trace (app/workflows/trace.py) speak in codes (skipped,
preference_off, condition: …); these are the words an operator reads, in their language.
"""

from __future__ import annotations

from flask_babel import gettext, lazy_gettext, lazy_pgettext

from app.console.labels import label
from app.delivery.channels import channel_labels

KIND_LABELS = {
    "channel": lazy_pgettext("workflow step", "channel"),
    "delay": lazy_pgettext("workflow step", "delay"),
    "batch": lazy_pgettext("workflow step", "batch"),
    "digest": lazy_pgettext("workflow step", "digest"),
    "throttle": lazy_pgettext("workflow step", "throttle"),
    "exit": lazy_pgettext("workflow step", "exit"),
}
# What a step would do in the test run.
OUTCOME_LABELS = {
    "sent": lazy_pgettext("test run", "sent"),
    "skipped": lazy_pgettext("test run", "skipped"),
    "waits": lazy_pgettext("test run", "waits"),
    "exits": lazy_pgettext("test run", "exits"),
    "continues": lazy_pgettext("test run", "continues"),
    "not_reached": lazy_pgettext("test run", "not reached"),
    "shown": lazy_pgettext("test run", "shown"),
    "digested": lazy_pgettext("test run", "digested"),
    "applies": lazy_pgettext("test run", "applies"),
}
# What a step of a notification's run did (or will do).
STATE_LABELS = {
    "shown": lazy_pgettext("workflow run", "shown"),
    "hidden": lazy_pgettext("workflow run", "not in the inbox"),
    "waited": lazy_pgettext("workflow run", "waited"),
    "waiting": lazy_pgettext("workflow run", "waiting"),
    "applied": lazy_pgettext("workflow run", "applied"),
    "sent": lazy_pgettext("workflow run", "sent"),
    "skipped": lazy_pgettext("workflow run", "skipped"),
    "failed": lazy_pgettext("workflow run", "failed"),
    "pending": lazy_pgettext("workflow run", "pending"),
    "sending": lazy_pgettext("workflow run", "sending"),
    "standby": lazy_pgettext("workflow run", "standby"),
    "not_sent": lazy_pgettext("workflow run", "not sent"),
    "exited": lazy_pgettext("workflow run", "exited"),
    "continued": lazy_pgettext("workflow run", "continued"),
    "not_reached": lazy_pgettext("workflow run", "not reached"),
}
# The tag colour of each outcome and state (the word is always shown too: colour is never the only sign).
TAGS = {
    "sent": "sent", "shown": "sent", "digested": "info", "applies": "info", "applied": "info",
    "waits": "pending", "waiting": "pending", "waited": "skipped", "pending": "pending", "sending": "sending",
    "skipped": "skipped", "not_sent": "skipped", "not_reached": "skipped", "hidden": "skipped",
    "standby": "standby", "exits": "warning", "exited": "warning", "continues": "skipped", "continued": "skipped",
    "failed": "failed",
}  # fmt: skip
REASONS = {
    "preference_off": lazy_gettext("the member turned this channel off"),
    "read": lazy_gettext("read by then"),
    "seen": lazy_gettext("seen by then"),
    "quiet_hours": lazy_gettext("held for quiet hours"),
    "condition": lazy_gettext("condition false"),
    "workflow_exit": lazy_gettext("an exit step ended the run"),
    "online": lazy_gettext("the member was online"),
    "seen_in_app": lazy_gettext("an open tab showed it"),
    "digested": lazy_gettext("goes in the member's digest"),
    "cancelled": lazy_gettext("cancelled"),
    "capped": lazy_gettext("over the type's cap"),
}
ONLY_IF_LABELS = {
    "unread": lazy_gettext("only if unread"),
    "unseen": lazy_gettext("only if unseen"),
    "offline": lazy_gettext("only if offline"),
}
FREQUENCY_LABELS = {"hourly": lazy_gettext("hourly"), "daily": lazy_gettext("daily")}


def reason_text(code: str | None) -> str:
    """A reason code in words: "condition: no such key" → "condition false: no such key"; unknown codes as they are."""
    if not code:
        return ""
    if code.startswith("condition: "):
        return gettext("condition false: %(why)s", why=code.removeprefix("condition: "))
    if code.startswith("no_") and code.endswith("_target"):
        return gettext("nowhere to send")
    return label(REASONS, code)


def span(seconds: float) -> str:
    """A length of time in its two largest units: 30 min, 4 h 30 min, 1 d 2 h, 45 s."""
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        gettext("%(n)s d", n=days) if days else None,
        gettext("%(n)s h", n=hours) if hours else None,
        gettext("%(n)s min", n=minutes) if minutes else None,
        gettext("%(n)s s", n=secs) if secs else None,
    ]
    shown = [part for part in parts if part][:2]
    return " ".join(shown) if shown else gettext("%(n)s s", n=0)


def offset(seconds: float) -> str:
    """When, relative to the start: "at once", "+30 min"."""
    if round(seconds) <= 0:
        return gettext("at once")
    return gettext("+%(span)s", span=span(seconds))


def step_title(step) -> str:
    """What a step is, in a few words: "Push", "Wait 30 min", "Digest (daily)", "Exit"."""
    channels = channel_labels()
    if step.kind == "channel":
        return label(channels, step.channel)
    if step.kind == "delay":
        if step.seconds is not None:
            return gettext("Wait %(span)s", span=span(step.seconds))
        if step.until is not None:
            return gettext("Wait until %(field)s", field=step.until)
        return gettext("Wait until %(time)s, the member's time", time=step.local_time)
    if step.kind == "digest":
        return gettext("E-mail digest (%(frequency)s)", frequency=label(FREQUENCY_LABELS, step.frequency))
    if step.kind == "batch":
        return gettext("Batch for %(span)s", span=span(step.window or 0))
    if step.kind == "throttle":
        return gettext("At most %(count)s per %(span)s", count=step.count, span=span(step.window or 0))
    return gettext("Exit") if step.condition is None else gettext("Exit if the condition holds")


def step_rules(step) -> list[str]:
    """A step's send-only-if rules in words."""
    return [label(ONLY_IF_LABELS, value) for value in step.only_if]
