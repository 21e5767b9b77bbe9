"""The analytics page's SVG charts: outcomes per hour or day (stacked bars), and times to send per group (bars).

The geometry is computed here and drawn by templates/console/analytics.html, like app/console/charts.py;
each chart has a data table beside it on the page, which the <desc> summarises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from flask_babel import format_number, gettext, lazy_gettext

from app.analytics.queries import Figures
from app.console.charts import StackedBars, Tick

# Bottom to top: what reached people, what went out without a report yet, what came back, what did not go.
OUTCOMES = ("delivered", "sent_only", "bounced", "failed", "skipped")
OUTCOME_WORDS = {
    "delivered": lazy_gettext("Delivered"),
    "sent_only": lazy_gettext("Sent, no report"),
    "bounced": lazy_gettext("Bounced"),
    "failed": lazy_gettext("Failed"),
    "skipped": lazy_gettext("Skipped"),
}
WIDTH, RIGHT = 720, 8
SERIES_LEFT = 56  # room for the series chart's y labels (the rest of its frame is charts.py's)
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
class SeriesChart(StackedBars):
    """Stacked bars of outcomes per bucket, with their axis ticks."""

    left: int = SERIES_LEFT
    totals: dict[str, int] = field(default_factory=dict)
    summary: str = ""


def series_chart(series: list[tuple[datetime, dict[str, int]]], label_of) -> SeriesChart:
    """Lay out the outcome bars of each bucket; label_of(bucket) is its axis text."""
    chart = SeriesChart()
    columns = [(label_of(bucket), outcomes(counts)) for bucket, counts in series]
    chart.totals = {name: sum(parts[name] for _, parts in columns) for name in OUTCOMES}
    every = max(len(columns) // 6, 1)
    peak = chart.stack(columns, OUTCOMES, lambda index: index % every == 0)
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
