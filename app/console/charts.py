"""Server-rendered SVG charts (no JavaScript, no CDN): the geometry is computed here, the markup is a template.

`deliveries_per_minute` lays out a stacked bar per minute for the last 60 minutes, one colour per
delivery status (CSS classes in static/css/console_ops.css), with a nice y scale, time labels in the
operator's zone, and the rows of the data table that stands in for the picture.
"""

from __future__ import annotations

import math
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
class Chart:
    """Everything the SVG template draws, plus the data table rows."""

    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    plot_width: float = WIDTH - LEFT - RIGHT
    plot_height: float = HEIGHT - TOP - BOTTOM
    segments: list[Segment] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    rows: list[tuple[str, dict[str, int], int]] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)
    peak: int = 0

    @property
    def baseline(self) -> float:
        """The y of the x axis."""
        return self.top + self.plot_height

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
    per_minute = [{s: counts.get((m, s), 0) for s in STATUS_ORDER} for m in minutes]
    chart.peak = max((sum(c.values()) for c in per_minute), default=0)
    chart.totals = {s: sum(c[s] for c in per_minute) for s in STATUS_ORDER}
    step = nice_ceiling(math.ceil(chart.peak / 4))  # about four gridlines at round numbers
    scale_max = step * max(math.ceil(chart.peak / step), 1)
    slot = chart.plot_width / MINUTES
    for index, (minute, by_status) in enumerate(zip(minutes, per_minute, strict=True)):
        label = minute.astimezone(zone).strftime("%H:%M")
        x, stacked = chart.left + index * slot + BAR_GAP / 2, 0
        for status in STATUS_ORDER:
            count = by_status[status]
            if not count:
                continue
            height = count / scale_max * chart.plot_height
            stacked += height
            chart.segments.append(
                Segment(
                    status,
                    round(x, 2),
                    round(chart.baseline - stacked, 2),
                    round(slot - BAR_GAP, 2),
                    round(height, 2),
                    count,
                    label,
                )
            )
        if sum(by_status.values()):
            chart.rows.append((label, by_status, sum(by_status.values())))
        if index % 10 == 0 or index == MINUTES - 1:
            chart.x_ticks.append(Tick(round(chart.left + index * slot + slot / 2, 2), label))
    for value in range(0, scale_max + 1, step):
        chart.y_ticks.append(
            Tick(round(chart.baseline - value / scale_max * chart.plot_height, 2), format_number(value))
        )
    return chart
