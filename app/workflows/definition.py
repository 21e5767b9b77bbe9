"""A workflow document: a type's delivery plan as ordered steps, parsed, checked and written back canonically.

The same JSON shape is what the console edits, the API reads and writes, and the YAML files of
`flask workflows export/apply` hold:

    {"steps": [{"kind": "channel", "channel": "in_app"},
               {"kind": "delay", "seconds": 1800},
               {"kind": "channel", "channel": "push", "only_if": ["unread"]},
               {"kind": "delay", "seconds": 14400},
               {"kind": "channel", "channel": "sms", "only_if": ["unread"], "condition": "data.amount > 10000"},
               {"kind": "digest", "frequency": "daily", "only_if": ["unread"], "condition": "!(data.amount > 10000)"}]}

Every problem is reported with the step (from 1) and the field it is about, all at once, so the console can put
each message at its field and the API can name them in one 422.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from flask_babel import gettext

from app.delivery.channels import routable_names
from app.workflows import conditions

KINDS = ("channel", "delay", "batch", "digest", "throttle", "exit")
ONLY_IF = ("unread", "unseen", "offline")
DIGEST_FREQUENCIES = ("hourly", "daily")
MAX_STEPS = 20
DELAY_MAX_SECONDS = 30 * 86400
BATCH_MAX_SECONDS = 86400
THROTTLE_MAX_COUNT = 10000
PAYLOAD_PATH_RE = re.compile(r"^data(\.[A-Za-z_][A-Za-z0-9_]{0,63}){1,8}$")
LOCAL_TIME_RE = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
# The fields each kind takes besides `kind` (anything else is refused, so a typo is never silently ignored).
FIELDS = {
    "channel": ("channel", "only_if", "condition", "wait_for_tab"),
    "delay": ("seconds", "until", "local_time"),
    "batch": ("window",),
    "digest": ("frequency", "only_if", "condition"),
    "throttle": ("count", "window"),
    "exit": ("condition",),
}


@dataclass(frozen=True)
class Step:
    """One step; only the fields of its kind are set."""

    kind: str
    channel: str | None = None  # channel: in_app, email, push, sms, chat
    only_if: tuple[str, ...] = ()  # channel, digest: unread | unseen, offline
    condition: str | None = None  # channel, digest, exit: CEL
    wait_for_tab: bool = False  # push: wait for the in-app frame's ack, skip it if a tab showed it
    seconds: int | None = None  # delay: a duration
    until: str | None = None  # delay: a time in the payload ("data.remind_at", ISO 8601)
    local_time: str | None = None  # delay: the member's next local HH:MM
    window: int | None = None  # batch, throttle: seconds
    count: int | None = None  # throttle: messages per window
    frequency: str | None = None  # digest: hourly | daily

    @property
    def delivery_channel(self) -> str | None:
        """The ledger channel this step sends on (a digest is e-mail), or None (in-app and the rest)."""
        if self.kind == "digest":
            return "email"
        if self.kind == "channel" and self.channel != "in_app":
            return self.channel
        return None


@dataclass(frozen=True)
class Workflow:
    """A checked workflow: its steps in order."""

    steps: tuple[Step, ...]

    def delivery_steps(self) -> list[tuple[int, Step]]:
        """(position from 1, step) of the steps that send through the ledger, in order."""
        return [(i, s) for i, s in enumerate(self.steps, 1) if s.delivery_channel is not None]

    def has_in_app(self) -> bool:
        """Whether the notification shows in the inbox."""
        return any(s.kind == "channel" and s.channel == "in_app" for s in self.steps)


@dataclass(frozen=True)
class Problem:
    """What is wrong, where: step from 1 (None: the document), and the field."""

    step: int | None
    field: str
    message: str

    def as_json(self) -> dict:
        """The API's and the console's shape of one problem."""
        return {"step": self.step, "field": self.field, "message": self.message}


class WorkflowInvalid(ValueError):
    """The document does not describe a workflow Hato can run; nothing was changed."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        first = problems[0]
        where = f"step {first.step} {first.field}" if first.step else first.field
        super().__init__(
            f"{where}: {first.message}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
        )


@dataclass
class _Reader:
    problems: list[Problem] = field(default_factory=list)

    def add(self, step: int | None, name: str, message: str) -> None:
        self.problems.append(Problem(step, name, message))

    def integer(self, n: int, raw: Mapping, name: str, low: int, high: int) -> int | None:
        value = raw.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.add(n, name, gettext("A whole number from %(low)s to %(high)s.", low=low, high=high))
            return None
        return value


def parse(document: object) -> Workflow:
    """Check document and return its workflow, or raise WorkflowInvalid with every problem found."""
    reader = _Reader()
    if not isinstance(document, Mapping) or not isinstance(document.get("steps"), list):
        raise WorkflowInvalid([Problem(None, "steps", gettext("A workflow is an object with a list of steps."))])
    extra = sorted(set(document) - {"steps"})
    if extra:
        reader.add(None, extra[0], gettext("Unknown field."))
    raw_steps = document["steps"]
    if not 1 <= len(raw_steps) <= MAX_STEPS:
        reader.add(None, "steps", gettext("A workflow has 1 to %(max)s steps.", max=MAX_STEPS))
    steps = [_step(reader, n, raw) for n, raw in enumerate(raw_steps[:MAX_STEPS], 1)]
    if not reader.problems:
        _check_order(reader, steps)
    if reader.problems:
        raise WorkflowInvalid(reader.problems)
    return Workflow(tuple(steps))


def _step(reader: _Reader, n: int, raw: object) -> Step:
    if not isinstance(raw, Mapping):
        reader.add(n, "kind", gettext("Each step is an object with a kind."))
        return Step("exit")
    kind = raw.get("kind")
    if kind not in KINDS:
        reader.add(n, "kind", gettext("The kind is one of %(kinds)s.", kinds=", ".join(KINDS)))
        return Step("exit")
    for name in sorted(set(raw) - {"kind", *FIELDS[kind]}):
        reader.add(n, name, gettext("A %(kind)s step has no field %(name)s.", kind=kind, name=name))
    values: dict = {}
    if kind == "channel":
        channel = raw.get("channel")
        if channel not in ("in_app", *routable_names()):
            reader.add(
                n, "channel", gettext("Choose one of %(names)s.", names=", ".join(("in_app", *routable_names())))
            )
        values["channel"] = channel if isinstance(channel, str) else None
        tab = raw.get("wait_for_tab", False)
        if not isinstance(tab, bool) or (tab and channel != "push"):
            reader.add(n, "wait_for_tab", gettext("Only a push step waits for the open tab (true or false)."))
        values["wait_for_tab"] = tab is True
    if kind in ("channel", "digest"):
        values["only_if"] = _only_if(reader, n, raw.get("only_if", []), in_app=values.get("channel") == "in_app")
    if kind in ("channel", "digest", "exit"):
        values["condition"] = _condition(reader, n, raw.get("condition"), in_app=values.get("channel") == "in_app")
    if kind == "delay":
        values.update(_delay(reader, n, raw))
    if kind in ("batch", "throttle"):
        high = BATCH_MAX_SECONDS if kind == "batch" else DELAY_MAX_SECONDS
        values["window"] = reader.integer(n, raw, "window", 1, high)
        if "window" not in raw:
            reader.add(n, "window", gettext("Give the window in seconds."))
    if kind == "throttle":
        values["count"] = reader.integer(n, raw, "count", 1, THROTTLE_MAX_COUNT)
        if "count" not in raw:
            reader.add(n, "count", gettext("Give how many messages the window allows."))
    if kind == "digest":
        frequency = raw.get("frequency")
        if frequency not in DIGEST_FREQUENCIES:
            reader.add(n, "frequency", gettext("A digest is hourly or daily."))
        values["frequency"] = frequency if frequency in DIGEST_FREQUENCIES else None
    return Step(kind, **values)


def _only_if(reader: _Reader, n: int, raw: object, in_app: bool) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or any(value not in ONLY_IF for value in raw):
        reader.add(n, "only_if", gettext("Send only if: a list of %(choices)s.", choices=", ".join(ONLY_IF)))
        return ()
    if "unread" in raw and "unseen" in raw:
        reader.add(n, "only_if", gettext("Choose unread or unseen, not both (a read notification is seen)."))
    if raw and in_app:
        reader.add(n, "only_if", gettext("The in-app step is the notification itself: it has no rule."))
    return tuple(value for value in ONLY_IF if value in raw)


def _condition(reader: _Reader, n: int, raw: object, in_app: bool) -> str | None:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if not isinstance(raw, str):
        reader.add(n, "condition", gettext("A condition is a CEL expression, as text."))
        return None
    if in_app:
        reader.add(n, "condition", gettext("The in-app step is the notification itself: it has no condition."))
        return None
    try:
        return conditions.check(raw).source
    except conditions.ConditionError as error:
        reader.add(n, "condition", str(error))
        return None


def _delay(reader: _Reader, n: int, raw: Mapping) -> dict:
    given = [name for name in ("seconds", "until", "local_time") if raw.get(name) is not None]
    if len(given) != 1:
        reader.add(n, "seconds", gettext("A delay waits a number of seconds, until a time in the payload, or until "
                                         "the member's next local time: exactly one of them."))  # fmt: skip
        return {}
    name = given[0]
    if name == "seconds":
        return {"seconds": reader.integer(n, raw, "seconds", 1, DELAY_MAX_SECONDS)}
    value = raw[name]
    if name == "until" and not (isinstance(value, str) and PAYLOAD_PATH_RE.match(value)):
        reader.add(n, "until", gettext("Name a field of the payload, such as data.remind_at."))
        return {}
    if name == "local_time" and not (isinstance(value, str) and LOCAL_TIME_RE.match(value)):
        reader.add(n, "local_time", gettext("A local time is HH:MM, from 00:00 to 23:59."))
        return {}
    return {name: value}


def _check_order(reader: _Reader, steps: list[Step]) -> None:
    """The rules between steps: where in-app and batch may stand, each channel once, nothing after an exit."""
    sent: dict[str, int] = {}
    waited = False
    for n, step in enumerate(steps, 1):
        if step.kind == "batch" and n != 1:
            reader.add(n, "kind", gettext("A batch step comes first: events join the open notification."))
        if step.kind in ("batch", "throttle", "digest") and any(s.kind == step.kind for s in steps[: n - 1]):
            reader.add(n, "kind", gettext("A workflow has one %(kind)s step at most.", kind=step.kind))
        channel = step.delivery_channel or (step.channel if step.kind == "channel" else None)
        if channel is not None:
            if channel in sent:
                reader.add(n, "channel", gettext("Step %(step)s already sends on %(channel)s: each channel once.",
                                                 step=sent[channel], channel=channel))  # fmt: skip
            sent[channel] = n
        if step.kind == "channel" and step.channel == "in_app" and waited:
            message = gettext("The in-app step comes before any delay: the inbox shows the notification when "
                              "it is accepted (use send_at to schedule it).")  # fmt: skip
            reader.add(n, "channel", message)
        if step.kind == "delay":
            waited = True
        if step.kind == "exit" and step.condition is None and n < len(steps):
            reader.add(n + 1, "kind", gettext("An exit without a condition ends the run: nothing after it runs."))
    if not sent:
        reader.add(None, "steps", gettext("A workflow sends on at least one channel."))


def to_document(workflow: Workflow) -> dict:
    """The canonical JSON of workflow: its kind's fields only, defaults left out (what export and diffs show)."""
    out = []
    for step in workflow.steps:
        item: dict = {"kind": step.kind}
        for name in FIELDS[step.kind]:
            value = getattr(step, name)
            if value in (None, (), False):
                continue
            item[name] = list(value) if isinstance(value, tuple) else value
        out.append(item)
    return {"steps": out}


def normalized(document: object) -> dict:
    """document checked and written canonically (raises WorkflowInvalid)."""
    return to_document(parse(document))
