"""Server-rendered SVG charts (no JavaScript, no CDN): the geometry is computed here, the markup is a template.

`deliveries_per_minute` lays out a stacked bar per minute for the last 60 minutes, one colour per
delivery status (CSS classes in static/css/console_ops.css), with a nice y scale, time labels in the
operator's zone, and the rows of the data table that stands in for the picture.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo

from flask_babel import format_number, gettext, lazy_pgettext, ngettext

# Bottom to top: what went out, what waits, what will not go out.
STATUS_ORDER = ("sent", "sending", "pending", "skipped", "passed", "failed")
STATUS_WORDS = {
    "sent": lazy_pgettext("delivery status", "sent"),
    "sending": lazy_pgettext("delivery status", "sending"),
    "pending": lazy_pgettext("delivery status", "pending"),
    "skipped": lazy_pgettext("delivery status", "skipped"),
    "passed": lazy_pgettext("delivery status", "passed over"),
    "failed": lazy_pgettext("delivery status", "failed"),
}
MINUTES = 60
WIDTH, HEIGHT = 720, 240
LEFT, RIGHT, TOP, BOTTOM = 48, 8, 12, 28
BAR_GAP = 2


@dataclass(frozen=True)
class Segment:
    """One status's part of one minute's bar."""

    status: str
    x: float
    y: float
    width: float
    height: float
    count: int
    label: str


@dataclass(frozen=True)
class Tick:
    """An axis label at a position."""

    position: float
    label: str


@dataclass
class StackedBars:
    """What every stacked-bar chart draws: its frame, each bar's segments and both axes' ticks (stack() lays them)."""

    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = RIGHT
    top: int = TOP
    bottom: int = BOTTOM
    segments: list[Segment] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)

    @property
    def plot_width(self) -> float:
        """The width the bars share."""
        return self.width - self.left - self.right

    @property
    def plot_height(self) -> float:
        """The height of the tallest bar's scale."""
        return self.height - self.top - self.bottom

    @property
    def baseline(self) -> float:
        """The y of the x axis."""
        return self.top + self.plot_height

    def stack(self, columns: Sequence[tuple[str, Mapping[str, int]]], order: Sequence[str],
              x_tick: Callable[[int], bool]) -> int:  # fmt: skip
        """Lay out one bar per (label, counts by part) column, parts bottom to top in order, an x tick where
        x_tick(index) holds and the y axis at round numbers (about four gridlines); return the tallest bar's total."""
        peak = max((sum(counts.values()) for _, counts in columns), default=0)
        step = nice_ceiling(math.ceil(peak / 4))
        scale_max = step * max(math.ceil(peak / step), 1)
        slot = self.plot_width / max(len(columns), 1)
        gap = min(BAR_GAP, slot / 4)
        for index, (label, counts) in enumerate(columns):
            x, stacked = round(self.left + index * slot + gap / 2, 2), 0.0
            for part in order:
                if not counts.get(part):
                    continue
                height = counts[part] / scale_max * self.plot_height
                stacked += height
                self.segments.append(Segment(part, x, round(self.baseline - stacked, 2), round(slot - gap, 2),
                                             round(height, 2), counts[part], label))  # fmt: skip
            if x_tick(index):
                self.x_ticks.append(Tick(round(self.left + index * slot + slot / 2, 2), label))
        for value in range(0, scale_max + 1, step):
            self.y_ticks.append(
                Tick(round(self.baseline - value / scale_max * self.plot_height, 2), format_number(value))
            )
        return peak


@dataclass
class Chart(StackedBars):
    """The dashboard's deliveries per minute, plus the data table's rows."""

    rows: list[tuple[str, dict[str, int], int]] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)
    peak: int = 0

    @property
    def summary(self) -> str:
        """A one-sentence description for the SVG's <desc>."""
        total = sum(self.totals.values())
        if not total:
            return gettext("No deliveries were created in the last 60 minutes.")
        parts = ", ".join(f"{self.totals[s]:,} {STATUS_WORDS[s]}" for s in STATUS_ORDER if self.totals.get(s))
        return ngettext(
            "%(count)s delivery in the last 60 minutes (%(parts)s); at most %(peak)s in one minute.",
            "%(count)s deliveries in the last 60 minutes (%(parts)s); at most %(peak)s in one minute.",
            total,
            count=format_number(total),
            parts=parts,
            peak=format_number(self.peak),
        )


def nice_ceiling(value: int) -> int:
    """The smallest 1, 2 or 5 × 10^k at or above value (at least 1)."""
    if value <= 1:
        return 1
    magnitude = 10 ** math.floor(math.log10(value))
    return next(step * magnitude for step in (1, 2, 5, 10) if step * magnitude >= value)


def deliveries_per_minute(now_minute: datetime, counts: dict[tuple[datetime, str], int], zone: tzinfo) -> Chart:
    """Lay out stacked bars for the 60 minutes ending with now_minute from {(minute, status): count}."""
    chart = Chart()
    minutes = [now_minute - timedelta(minutes=MINUTES - 1 - i) for i in range(MINUTES)]
    columns = [
        (minute.astimezone(zone).strftime("%H:%M"), {s: counts.get((minute, s), 0) for s in STATUS_ORDER})
        for minute in minutes
    ]
    chart.totals = {s: sum(c[s] for _, c in columns) for s in STATUS_ORDER}
    chart.rows = [
        (label, by_status, sum(by_status.values())) for label, by_status in columns if any(by_status.values())
    ]
    chart.peak = chart.stack(columns, STATUS_ORDER, lambda index: index % 10 == 0 or index == MINUTES - 1)
    return chart
