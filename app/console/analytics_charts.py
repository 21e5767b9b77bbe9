"""The analytics page's SVG charts: outcomes per hour or day (stacked bars), and times to send per group (bars).

The geometry is computed here and drawn by templates/console/analytics.html, like app/console/charts.py;
each chart has a data table beside it on the page, which the <desc> summarises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

from flask_babel import format_number, gettext, lazy_gettext

from app.analytics.queries import Figures
from app.console.charts import Segment, Tick, nice_ceiling

# Bottom to top: what reached people, what went out without a report yet, what came back, what did not go.
OUTCOMES = ("delivered", "sent_only", "bounced", "failed", "skipped")
OUTCOME_WORDS = {
    "delivered": lazy_gettext("Delivered"),
    "sent_only": lazy_gettext("Sent, no report"),
    "bounced": lazy_gettext("Bounced"),
    "failed": lazy_gettext("Failed"),
    "skipped": lazy_gettext("Skipped"),
}
WIDTH, HEIGHT = 720, 240
LEFT, RIGHT, TOP, BOTTOM = 56, 8, 12, 28
ROW, LABEL_WIDTH = 22, 140


def outcomes(counts: dict[str, int]) -> dict[str, int]:
    """A bucket's counts as the chart's stacked parts."""
    return {
        "delivered": counts["delivered"],
        "sent_only": max(counts["sent"] - counts["delivered"] - counts["bounced"], 0),
        "bounced": counts["bounced"],
        "failed": counts["failed"],
        "skipped": counts["skipped"],
    }


@dataclass
class SeriesChart:
    """Stacked bars of outcomes per bucket, with their axis ticks."""

    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    plot_width: float = WIDTH - LEFT - RIGHT
    plot_height: float = HEIGHT - TOP - BOTTOM
    segments: list[Segment] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)
    summary: str = ""

    @property
    def baseline(self) -> float:
        """The y of the x axis."""
        return self.top + self.plot_height


def series_chart(series: list[tuple[datetime, dict[str, int]]], label_of) -> SeriesChart:
    """Lay out the outcome bars of each bucket; label_of(bucket) is its axis text."""
    chart = SeriesChart()
    parts = [(bucket, outcomes(counts)) for bucket, counts in series]
    chart.totals = {name: sum(p[name] for _, p in parts) for name in OUTCOMES}
    peak = max((sum(p.values()) for _, p in parts), default=0)
    step = nice_ceiling(math.ceil(peak / 4))
    scale_max = step * max(math.ceil(peak / step), 1)
    slot = chart.plot_width / max(len(parts), 1)
    gap = min(2.0, slot / 4)
    for index, (bucket, by_outcome) in enumerate(parts):
        label, stacked = label_of(bucket), 0.0
        for name in OUTCOMES:
            if not by_outcome[name]:
                continue
            height = by_outcome[name] / scale_max * chart.plot_height
            stacked += height
            x = chart.left + index * slot + gap / 2
            chart.segments.append(
                Segment(
                    name,
                    round(x, 2),
                    round(chart.baseline - stacked, 2),
                    round(slot - gap, 2),
                    round(height, 2),
                    by_outcome[name],
                    label,
                )  # fmt: skip
            )
        if index % max(len(parts) // 6, 1) == 0:
            chart.x_ticks.append(Tick(round(chart.left + index * slot + slot / 2, 2), label))
    for value in range(0, scale_max + 1, step):
        chart.y_ticks.append(
            Tick(round(chart.baseline - value / scale_max * chart.plot_height, 2), format_number(value))
        )
    total = sum(chart.totals.values())
    if not total:
        chart.summary = gettext("No deliveries in this range.")
    else:
        words = ", ".join(f"{format_number(chart.totals[n])} {OUTCOME_WORDS[n]}" for n in OUTCOMES if chart.totals[n])
        chart.summary = gettext(
            "Outcomes of the deliveries accepted in this range, per period: %(parts)s; at most %(peak)s in one period.",
            parts=words,
            peak=format_number(peak),
        )
    return chart


@dataclass(frozen=True)
class TimeBar:
    """One group's p50 or p99 bar."""

    group: str
    which: str  # p50 or p99
    x: float
    y: float
    width: float
    height: float
    ms: float


@dataclass
class TimesChart:
    """Horizontal bars of p50 and p99 time to provider acceptance per group."""

    width: int = WIDTH
    height: int = 0
    left: int = LABEL_WIDTH
    plot_width: float = WIDTH - LABEL_WIDTH - RIGHT - 60
    bars: list[TimeBar] = field(default_factory=list)
    labels: list[Tick] = field(default_factory=list)
    summary: str = ""


def seconds_text(ms: float | None) -> str:
    """A time in ms as "≤ 1.2 s" or "≤ 340 ms" (histogram figures are upper edges); "—" when none."""
    if ms is None:
        return "—"
    if ms < 1000:
        return gettext("≤ %(n)s ms", n=format_number(round(ms)))
    return gettext("≤ %(n)s s", n=format_number(round(ms / 1000, 1 if ms < 10_000 else 0)))


def times_chart(groups: list[tuple[str, Figures]]) -> TimesChart:
    """Lay out p50 and p99 of 202 → provider accepted for each (label, figures) with any sends."""
    chart = TimesChart()
    timed = [(label, f.times) for label, f in groups if f.times["sent_p99_ms"] is not None]
    peak = max((t["sent_p99_ms"] for _, t in timed), default=0)
    chart.height = max(len(timed), 1) * ROW * 2 + 8
    for index, (label, times) in enumerate(timed):
        top = 4 + index * ROW * 2
        chart.labels.append(Tick(round(top + ROW, 2), label))
        for offset, which in enumerate(("p50", "p99")):
            ms = times[f"sent_{which}_ms"]
            chart.bars.append(
                TimeBar(
                    label,
                    which,
                    chart.left,
                    top + offset * ROW + 2,
                    round(ms / peak * chart.plot_width, 2) if peak else 0,
                    ROW - 4,
                    ms,
                )  # fmt: skip
            )
    if not timed:
        chart.summary = gettext("Nothing was sent in this range.")
    else:
        chart.summary = "; ".join(
            gettext(
                "%(group)s: half within %(p50)s, 99 %% within %(p99)s",
                group=label,
                p50=seconds_text(t["sent_p50_ms"]),
                p99=seconds_text(t["sent_p99_ms"]),
            )  # fmt: skip
            for label, t in timed
        )
    return chart
