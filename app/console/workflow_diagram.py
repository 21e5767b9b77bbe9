"""A workflow in words and as a picture: each step's one-line text, the type list's summary, the editor's SVG.

The SVG is drawn here, on the server, as a vertical flow of boxes (one per step, arrows between); an exit ends
its branch. Every text is escaped; colours come from the console's CSS variables (classes in console.css), so
the drawing follows light and dark mode.
"""

from __future__ import annotations

from flask_babel import gettext
from markupsafe import Markup, escape

from app.delivery.channels import channel_labels
from app.workflows.definition import Step, Workflow

CONDITION_CHARS = 36  # a condition is cut to this many characters in the drawing and the summary
SUMMARY_STEPS = 6  # the type list shows at most this many steps, then "…"
WIDTH, BOX_W, BOX_H, GAP, PAD = 320, 280, 58, 26, 8
UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


def duration(seconds: int) -> str:
    """30 min, 4 h, 2 s: the largest unit that divides it."""
    for size, unit in UNITS:
        if seconds % size == 0:
            count = seconds // size
            return {
                "d": gettext("%(n)s d", n=count),
                "h": gettext("%(n)s h", n=count),
                "min": gettext("%(n)s min", n=count),
                "s": gettext("%(n)s s", n=count),
            }[unit]
    return gettext("%(n)s s", n=seconds)  # pragma: no cover - 1 divides everything


def shorten(text: str, chars: int = CONDITION_CHARS) -> str:
    """text on one line, cut with … past chars."""
    text = " ".join(text.split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def kind_label(step: Step) -> str:
    """The step's first line: what it is."""
    if step.kind == "channel":
        return str(channel_labels().get(step.channel or "", step.channel or gettext("Channel")))
    return {
        "delay": gettext("Wait"),
        "batch": gettext("Batch"),
        "digest": gettext("Digest"),
        "throttle": gettext("Throttle"),
        "exit": gettext("Exit"),
    }.get(step.kind, step.kind)


def rules(step: Step) -> list[str]:
    """The step's own settings, one short phrase each."""
    out: list[str] = []
    if step.kind == "delay":
        if step.seconds:
            out.append(duration(step.seconds))
        elif step.until:
            out.append(gettext("until %(field)s", field=step.until))
        elif step.local_time:
            out.append(gettext("until %(time)s local time", time=step.local_time))
    if step.kind in ("batch", "throttle") and step.window:
        if step.kind == "throttle" and step.count:
            out.append(gettext("at most %(count)s per %(window)s", count=step.count, window=duration(step.window)))
        elif step.kind == "batch":
            out.append(gettext("events within %(window)s", window=duration(step.window)))
    if step.kind == "digest" and step.frequency:
        out.append(gettext("daily") if step.frequency == "daily" else gettext("hourly"))
    words = {"unread": gettext("if unread"), "unseen": gettext("if unseen"), "offline": gettext("if offline")}
    out.extend(words[value] for value in step.only_if if value in words)
    if step.wait_for_tab:
        out.append(gettext("if no open tab showed it"))
    if step.condition:
        out.append(gettext("when %(condition)s", condition=shorten(step.condition)))
    return out


def step_text(step: Step) -> str:
    """One step in words: its label, then its settings."""
    return " ".join([kind_label(step), *rules(step)])


def summary(document: dict | None) -> str:
    """The type list's line for a published document: "In-app → Wait 30 min → Push if unread …"."""
    raw = (document or {}).get("steps") or []
    steps = [lenient_step(item) for item in raw if isinstance(item, dict)]
    if not steps:
        return ""
    parts = [step.kind == "delay" and " ".join(rules(step)) or step_text(step) for step in steps[:SUMMARY_STEPS]]
    return " → ".join(parts) + (" → …" if len(steps) > SUMMARY_STEPS else "")


def lenient_step(raw: dict) -> Step:
    """A Step from a raw (perhaps invalid) step: each field kept only when its type is right, to draw it."""

    def text(name: str) -> str | None:
        value = raw.get(name)
        return value if isinstance(value, str) and value.strip() else None

    def number(name: str) -> int | None:
        value = raw.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    only_if = raw.get("only_if") or []
    return Step(
        kind=raw.get("kind") if isinstance(raw.get("kind"), str) else "?",
        channel=text("channel"),
        only_if=tuple(v for v in only_if if isinstance(v, str)) if isinstance(only_if, list) else (),
        condition=text("condition"),
        wait_for_tab=raw.get("wait_for_tab") is True,
        seconds=number("seconds"),
        until=text("until"),
        local_time=text("local_time"),
        window=number("window"),
        count=number("count"),
        frequency=text("frequency"),
    )


def render(workflow: Workflow, title: str) -> Markup:
    """The workflow as an inline SVG: boxes top to bottom, arrows between, an exit ending its branch."""
    steps = list(workflow.steps)
    ends = bool(steps) and not _stopped(steps)  # an End after the last step, unless an exit already ends it
    height = PAD * 2 + len(steps) * BOX_H + max(len(steps) - 1, 0) * GAP + (GAP + 28 if ends else 0)
    x = (WIDTH - BOX_W) // 2
    parts = [
        f'<svg class="workflow-diagram" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" aria-labelledby="workflow-diagram-title workflow-diagram-desc">',
        f'<title id="workflow-diagram-title">{escape(title)}</title>',
        f'<desc id="workflow-diagram-desc">{escape(_description(steps))}</desc>',
        '<defs><marker id="workflow-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="workflow-diagram__head"/></marker></defs>',
    ]
    y = PAD
    for n, step in enumerate(steps, 1):
        exit_ = step.kind == "exit"
        parts.append(f'<g class="workflow-diagram__step{" workflow-diagram__step--exit" if exit_ else ""}">')
        parts.append(
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="{BOX_H // 2 if exit_ else 8}" '
            'class="workflow-diagram__box"/>'
        )
        heading = f"{n}. {kind_label(step)}"
        parts.append(f'<text x="{x + 12}" y="{y + 22}" class="workflow-diagram__kind">{escape(heading)}</text>')
        detail = shorten(" · ".join(rules(step)), 44)
        if detail:
            parts.append(f'<text x="{x + 12}" y="{y + 43}" class="workflow-diagram__detail">{escape(detail)}</text>')
        parts.append("</g>")
        if n < len(steps) and not (exit_ and step.condition is None):
            parts.append(_arrow(WIDTH // 2, y + BOX_H, y + BOX_H + GAP))
        y += BOX_H + GAP
    if ends:
        y_end = y  # the last step drew no arrow: draw it to the End
        parts.append(_arrow(WIDTH // 2, y - GAP, y_end))
        parts.append(
            f'<rect x="{WIDTH // 2 - 40}" y="{y_end}" width="80" height="26" rx="13" class="workflow-diagram__end"/>'
            f'<text x="{WIDTH // 2}" y="{y_end + 17}" text-anchor="middle" class="workflow-diagram__detail">'
            f"{escape(gettext('End'))}</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every text above went through escape()


def _stopped(steps: list[Step]) -> bool:
    """Whether the last step is an exit that always ends the run (then no arrow leads on to the end)."""
    return bool(steps) and steps[-1].kind == "exit" and steps[-1].condition is None


def _arrow(cx: int, y1: int, y2: int) -> str:
    return (
        f'<line x1="{cx}" y1="{y1}" x2="{cx}" y2="{y2 - 1}" class="workflow-diagram__arrow" '
        'marker-end="url(#workflow-arrow)"/>'
    )


def _description(steps: list[Step]) -> str:
    return "; ".join(f"{n}. {step_text(step)}" for n, step in enumerate(steps, 1))
