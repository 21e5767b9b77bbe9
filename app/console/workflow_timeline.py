"""The test run as a picture: each step on its own row along a time axis (server-drawn SVG, like charts.py).

The geometry is computed here and drawn by templates/console/_workflow_timeline.html; the table beside it says
the same in words, and each mark has a shape of its own (filled: it goes out; hollow: it does not), so colour
is never the only sign.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from flask_babel import ngettext

from app.console.labels import label
from app.console.workflow_words import OUTCOME_LABELS, offset, span, step_title

WIDTH = 720
LEFT, RIGHT, TOP = 16, 16, 12
ROW = 34
AXIS = 30  # room under the rows for the time labels
CHAR_WIDTH = 6.6  # about how wide a character of the 12 px labels is, to keep them inside the picture
WIDE_FROM = 0x2E80  # CJK and the rest from here on take about two widths
# Axis steps in seconds, from a minute to a week: the smallest that gives at most six intervals is used.
TICK_STEPS = (60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)
# The mark each outcome gets: its shape, and whether it is filled (it goes out or ends the run).
MARKS = {
    "sent": ("circle", True), "shown": ("circle", True), "digested": ("square", True), "exits": ("diamond", True),
    "skipped": ("circle", False), "not_reached": ("circle", False), "continues": ("diamond", False),
    "applies": ("square", False), "waits": ("bar", True),
}  # fmt: skip


@dataclass(frozen=True)
class Row:
    """One step's row: its mark at x (a delay: a bar from x0 to x), its text beside it."""

    position: int
    outcome: str
    y: float
    x: float | None
    x0: float | None
    text: str
    text_x: float
    text_y: float
    anchor: str
    shape: str
    filled: bool


@dataclass(frozen=True)
class Tick:
    """A time label on the axis."""

    x: float
    label: str


@dataclass
class Timeline:
    """What the SVG draws."""

    width: int = WIDTH
    height: int = 0
    left: int = LEFT
    right: int = WIDTH - RIGHT
    axis_y: float = 0
    rows: list[Row] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)
    summary: str = ""


def _tick_step(total: float) -> int:
    return next((step for step in TICK_STEPS if total / step <= 6), TICK_STEPS[-1] * ((int(total) // 604800) // 6 + 1))


def _place(text: str, x: float | None, x0: float | None, y: float) -> tuple[float, float, str]:
    """Where a row's words go: after its mark, else before it (a bar: before its start), else just above it."""
    needed = sum(CHAR_WIDTH * (2 if ord(char) >= WIDE_FROM else 1) for char in text)
    if x is None:  # not reached: the words alone, at the start
        return LEFT, y + 4, "start"
    start = x0 if x0 is not None else x
    if x + 10 + needed <= WIDTH - RIGHT:
        return round(x + 10, 1), y + 4, "start"
    if start - 10 - needed >= 0:
        return round(start - 10, 1), y + 4, "end"
    return round(max(start, LEFT), 1), y - 8, "start"


def timeline(workflow, outcomes: list, start: datetime) -> Timeline:
    """Lay out the test run of workflow (its outcomes, in step order) that starts at start."""
    seconds = [(o.at - start).total_seconds() for o in outcomes if o.at is not None]
    total = max([*seconds, 0.0])
    scale = (WIDTH - LEFT - RIGHT) / total if total > 0 else 0.0
    chart = Timeline(height=TOP + ROW * len(outcomes) + AXIS)
    chart.axis_y = TOP + ROW * len(outcomes)

    def x_of(at: datetime) -> float:
        return round(LEFT + (at - start).total_seconds() * scale, 1)

    cursor = start
    for index, (step, o) in enumerate(zip(workflow.steps, outcomes, strict=True)):
        y = TOP + ROW * index + ROW / 2
        text = f"{o.position}. {step_title(step)} · {label(OUTCOME_LABELS, o.outcome)}"
        shape, filled = MARKS.get(o.outcome, ("circle", False))
        x = x_of(o.at) if o.at is not None else None
        x0 = None
        if o.kind == "delay" and o.at is not None:
            x0, cursor = x_of(cursor), o.at
        text_x, text_y, anchor = _place(text, x, x0, y)
        chart.rows.append(Row(o.position, o.outcome, y, x, x0, text, text_x, text_y, anchor, shape, filled))
    if total > 0:
        step = _tick_step(total)
        chart.ticks = [Tick(round(LEFT + t * scale, 1), offset(t)) for t in range(0, int(total) + 1, step)]
    else:
        chart.ticks = [Tick(LEFT, offset(0))]
    going = sum(1 for o in outcomes if o.outcome in ("sent", "shown", "digested"))
    chart.summary = " ".join(
        (
            ngettext("%(num)s step over %(span)s.", "%(num)s steps over %(span)s.", len(outcomes), span=span(total)),
            ngettext("%(num)s goes out.", "%(num)s go out.", going),
        )
    )
    return chart
