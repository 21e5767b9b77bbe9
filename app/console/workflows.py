"""The workflow editor: a type's delivery steps (the draft, else the published version) edited, checked live,
drawn, saved as the draft, published, or the draft discarded.

The form holds every step's fields under indexed names (steps-0-kind, steps-0-channel…). Each change posts the
whole form; the buttons "add", "remove-N", "up-N", "down-N" are applied here before the list is drawn again
(HTMX swaps only the list, a browser without scripts gets the whole page). Nothing is stored until "Save draft"
or "Publish".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from flask import abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext, lazy_gettext
from flask_login import current_user
from werkzeug.datastructures import MultiDict

from app.console import workflow_diagram
from app.console.blueprint import bp
from app.delivery.channels import channel_labels, routable_names
from app.notification_types import queries as type_queries
from app.refusal import Refused
from app.unitofwork import commit
from app.workflows import queries, service
from app.workflows.definition import FIELDS, KINDS, MAX_STEPS, Problem, Workflow, WorkflowInvalid, parse

INDEX_RE = re.compile(r"^steps-(\d{1,3})-kind$")
OP_RE = re.compile(r"^(remove|up|down)-(\d{1,3})$")
DELAY_BY = ("seconds", "until", "local_time")
# Where each of parse()'s field names is shown in the form (the rest: at the step's heading).
FIELD_WIDGET = {"seconds": "delay_value", "until": "delay_value", "local_time": "delay_value"}
KIND_LABELS = {
    "channel": lazy_gettext("Send on a channel"),
    "delay": lazy_gettext("Wait"),
    "batch": lazy_gettext("Batch (join events into one notification)"),
    "digest": lazy_gettext("E-mail digest"),
    "throttle": lazy_gettext("Throttle (at most N per window)"),
    "exit": lazy_gettext("Exit (end the run)"),
}
DELAY_LABELS = {
    "seconds": lazy_gettext("a number of seconds"),
    "until": lazy_gettext("until a time in the payload"),
    "local_time": lazy_gettext("until the member's next local time"),
}
READ_LABELS = {"": lazy_gettext("always"), "unread": lazy_gettext("only if unread"),
               "unseen": lazy_gettext("only if unseen")}  # fmt: skip
FREQUENCY_LABELS = {"daily": lazy_gettext("daily"), "hourly": lazy_gettext("hourly")}


@dataclass
class Editor:
    """What the page draws: the steps as the form holds them, the problems by place, the diagram."""

    steps: list[dict]
    problems: dict[tuple[int | None, str], list[str]] = field(default_factory=dict)
    workflow: Workflow | None = None

    @property
    def document(self) -> dict:
        """The steps as the workflow document parse() reads."""
        return {"steps": [_to_raw(step) for step in self.steps]}

    def at(self, n: int | None, name: str) -> list[str]:
        """The messages for step n's field name (n from 1; None: the whole document)."""
        return self.problems.get((n, name), [])

    def elsewhere(self, n: int) -> list[str]:
        """Step n's messages about a field the form does not show for its kind."""
        shown = _widgets(self.steps[n - 1]) if 0 < n <= len(self.steps) else set()
        return [m for (step, name), messages in self.problems.items() if step == n and name not in shown
                for m in messages]  # fmt: skip

    @property
    def document_problems(self) -> list[str]:
        """The messages about the whole document (shown at the top)."""
        return [m for (step, _), messages in self.problems.items() if step is None for m in messages]

    @property
    def valid(self) -> bool:
        """Whether parse() found nothing wrong."""
        return not self.problems


def _widgets(step: dict) -> set[str]:
    """The form fields drawn for a step (condition fields and the rest), as parse() names them, plus kind."""
    names = {"kind", *FIELDS.get(step.get("kind"), ())}
    if step.get("kind") == "delay":
        names = {"kind", "delay_value"}
    return names


def _from_document(document: dict | None) -> list[dict]:
    """The form's steps from a stored document (every field the form has, as text)."""
    out = []
    for raw in (document or {}).get("steps", []):
        step = {"kind": raw.get("kind", "channel")}
        only_if = raw.get("only_if") or []
        step["channel"] = raw.get("channel") or ""
        step["read"] = "unread" if "unread" in only_if else "unseen" if "unseen" in only_if else ""
        step["offline"] = "offline" in only_if
        step["condition"] = raw.get("condition") or ""
        step["wait_for_tab"] = bool(raw.get("wait_for_tab"))
        step["delay_by"] = next((name for name in DELAY_BY if raw.get(name) is not None), "seconds")
        step["delay_value"] = str(raw.get(step["delay_by"], "") or "")
        step["window"] = _text(raw.get("window"))
        step["count"] = _text(raw.get("count"))
        step["frequency"] = raw.get("frequency") or "daily"
        out.append(step)
    return out


def _text(value) -> str:
    return "" if value is None else str(value)


def _from_form(form: MultiDict) -> list[dict]:
    """The steps as posted, in their index order."""
    indexes = sorted(int(m.group(1)) for key in form if (m := INDEX_RE.match(key)))
    steps = []
    for i in indexes[: MAX_STEPS * 2]:
        get = lambda name, i=i: form.get(f"steps-{i}-{name}", "").strip()  # noqa: E731
        steps.append({
            "kind": get("kind"),
            "channel": get("channel"),
            "read": get("read"),
            "offline": bool(get("offline")),
            "condition": form.get(f"steps-{i}-condition", ""),
            "wait_for_tab": bool(get("wait_for_tab")),
            "delay_by": get("delay_by") if get("delay_by") in DELAY_BY else "seconds",
            "delay_value": get("delay_value"),
            "window": get("window"),
            "count": get("count"),
            "frequency": get("frequency") or "daily",
        })  # fmt: skip
    return steps


def _number(text: str):
    """A whole number as int; anything else as given (parse() then names the field)."""
    return int(text) if re.fullmatch(r"-?\d{1,12}", text) else text or None


def _to_raw(step: dict) -> dict:
    """One form step as the document's step: only its kind's fields."""
    kind = step["kind"]
    raw: dict = {"kind": kind}
    if kind == "channel":
        raw["channel"] = step["channel"]
        if step["channel"] == "push" and step["wait_for_tab"]:
            raw["wait_for_tab"] = True
    if kind in ("channel", "digest") and not (kind == "channel" and step["channel"] == "in_app"):
        only_if = [step["read"]] if step["read"] in ("unread", "unseen") else []
        raw["only_if"] = only_if + (["offline"] if step["offline"] else [])
    if kind in ("channel", "digest", "exit") and step["condition"].strip() and step.get("channel") != "in_app":
        raw["condition"] = step["condition"]
    if kind == "delay":
        value = step["delay_value"]
        raw[step["delay_by"]] = _number(value) if step["delay_by"] == "seconds" else value or None
    if kind in ("batch", "throttle") and step["window"]:
        raw["window"] = _number(step["window"])
    if kind == "throttle" and step["count"]:
        raw["count"] = _number(step["count"])
    if kind == "digest":
        raw["frequency"] = step["frequency"]
    return raw


def _blank(kind: str) -> dict:
    step = _from_document({"steps": [{"kind": kind}]})[0]
    if kind == "channel":
        step["channel"] = "email"
    return step


def _apply(steps: list[dict], op: str, kind: str) -> list[dict]:
    """The step list after the button op (add, remove-N, up-N, down-N; N from 0)."""
    if op == "add" and kind in KINDS and len(steps) < MAX_STEPS:
        return [*steps, _blank(kind)]
    match = OP_RE.match(op)
    if not match:
        return steps
    what, i = match.group(1), int(match.group(2))
    if not 0 <= i < len(steps):
        return steps
    steps = list(steps)
    if what == "remove":
        del steps[i]
    elif what == "up" and i > 0:
        steps[i - 1], steps[i] = steps[i], steps[i - 1]
    elif what == "down" and i < len(steps) - 1:
        steps[i], steps[i + 1] = steps[i + 1], steps[i]
    return steps


def _check(steps: list[dict]) -> Editor:
    editor = Editor(steps)
    try:
        editor.workflow = parse(editor.document)
    except WorkflowInvalid as exc:
        editor.problems = _placed(exc.problems)
    return editor


def _placed(problems: list[Problem]) -> dict:
    out: dict[tuple[int | None, str], list[str]] = {}
    for p in problems:
        out.setdefault((p.step, FIELD_WIDGET.get(p.field, p.field)), []).append(p.message)
    return out


def _type_or_404(type_: str):
    item = type_queries.notification_type(type_)
    if item is None:
        abort(404)
    return item


def _render(item, editor: Editor, status: int = 200, note: str = "", errors: list[str] | None = None):
    partial = request.headers.get("HX-Request") == "true" and request.method == "POST"
    template = "console/_workflow_body.html" if partial else "console/workflow_editor.html"
    drawn = editor.workflow or Workflow(tuple(workflow_diagram.lenient_step(s) for s in editor.document["steps"]))
    context = {
        "item": item,
        "editor": editor,
        "diagram": workflow_diagram.render(drawn, gettext("Delivery steps of %(type)s", type=item.type)),
        "published": queries.published(item.type),
        "draft": queries.draft(item.type),
        "note": note,
        "add_kind": request.form.get("add_kind", "channel"),
        "errors": errors or [],
        "kinds": KINDS,
        "kind_labels": KIND_LABELS,
        "delay_labels": DELAY_LABELS,
        "read_labels": READ_LABELS,
        "frequency_labels": FREQUENCY_LABELS,
        "channels": {"in_app": channel_labels().get("in_app", "in_app")}
        | {name: channel_labels().get(name, name) for name in routable_names()},
    }
    # An HTMX swap must be a 2xx (htmx does not swap a 422); the problems are in the HTML either way.
    return render_template(template, **context), 200 if partial else status


@bp.get("/types/<type_>/workflow")
def workflow_editor(type_: str):
    """The type's steps: the draft if an operator left one, else the published version."""
    item = _type_or_404(type_)
    shown = queries.draft(type_) or queries.published(type_)
    source = shown.steps if shown else None
    return _render(item, _check(_from_document(source) or [_blank("channel")]))


@bp.post("/types/<type_>/workflow")
def workflow_change(type_: str):
    """Apply one button (add, remove, move; save, publish, discard) to the posted steps."""
    item = _type_or_404(type_)
    op = request.form.get("op", "")
    if op == "discard":
        discarded = service.discard_draft(current_user, type_)
        commit()
        flash(gettext("Draft discarded.") if discarded else gettext("There was no draft to discard."), "success")
        return redirect(url_for("console.workflow_editor", type_=type_))
    steps = _apply(_from_form(request.form), op, request.form.get("add_kind", ""))
    editor = _check(steps)
    note = request.form.get("note", "")
    if op not in ("save", "publish"):
        return _render(item, editor, note=note)
    if not editor.valid:
        return _render(item, editor, 422, note, [gettext("Nothing was saved: please correct the steps marked below.")])
    if op == "publish" and len(note) > service.NOTE_MAX:  # checked first: the draft is written before publish
        return _render(
            item, editor, 422, note, [gettext("A note has at most %(max)s characters.", max=service.NOTE_MAX)]
        )
    try:
        service.save_draft(current_user, type_, editor.document)
        if op == "publish":
            version = service.publish(current_user, type_, note)
    except WorkflowInvalid as exc:  # the form checked it already; parse() is the one judge
        editor.problems = _placed(exc.problems)
        return _render(item, editor, 422, note, [gettext("Nothing was saved: please correct the steps marked below.")])
    except Refused as exc:
        return _render(item, editor, 422, note, [str(exc)])
    commit()
    if op == "publish":
        flash(gettext("Version %(version)s published: new notifications follow it.", version=version.version),
              "success")  # fmt: skip
    else:
        flash(gettext("Draft saved. It runs once you publish it."), "success")
    return redirect(url_for("console.workflow_editor", type_=type_))
