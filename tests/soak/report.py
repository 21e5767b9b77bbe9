"""The soak's tables: latency per 5-minute window, and the witnesses' memory over the run."""

from __future__ import annotations

import statistics
from collections import defaultdict

WINDOW_SECONDS = 300
LEAK_WINDOW_SECONDS = 1200  # the last 20 minutes (or the last two thirds of a shorter run)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def windows(series: dict[str, list[tuple[float, float]]], started: float) -> str:
    """p50/p99 in ms of each series per window; each sample is (wall time it began, seconds it took)."""
    by_window: dict[tuple[str, int], list[float]] = defaultdict(list)
    for name, samples in series.items():
        for at, took in samples:
            by_window[(name, int((at - started) // WINDOW_SECONDS))].append(took * 1000)
    names = list(series)
    last = max((w for _, w in by_window), default=0)
    header = "| window | " + " | ".join(f"{name} n, p50, p99 (ms)" for name in names) + " |"
    lines = [header, "|" + "---|" * (len(names) + 1)]
    for w in range(last + 1):
        cells = []
        for name in names:
            got = by_window.get((name, w), [])
            cells.append(f"{len(got)}, {percentile(got, 0.5):.0f}, {percentile(got, 0.99):.0f}" if got else "—")
        lines.append(f"| {w * WINDOW_SECONDS // 60}–{(w + 1) * WINDOW_SECONDS // 60} min | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def growth(samples: list[tuple[float, int]], seconds: float) -> tuple[int, int, float]:
    """(KiB at the start of the leak window, KiB at the end, growth) from (seconds since start, KiB) samples.

    Each end is the median of the samples in its first or last minute, so one busy moment is not a trend.
    """
    window = LEAK_WINDOW_SECONDS if seconds > LEAK_WINDOW_SECONDS * 1.25 else seconds * 2 / 3
    begin = seconds - window
    head = [kib for t, kib in samples if begin <= t < begin + 60] or [samples[0][1]]
    tail = [kib for t, kib in samples if t >= seconds - 60] or [samples[-1][1]]
    first, end = int(statistics.median(head)), int(statistics.median(tail))
    return first, end, (end - first) / first if first else 0.0


def memory(rss: dict[str, list[tuple[float, int]]], seconds: float) -> str:
    lines = [
        "| process (never killed) | RSS at the window's start (MiB) | at the end (MiB) | growth |",
        "|---|---|---|---|",
    ]
    for name, samples in rss.items():
        first, end, grew = growth(samples, seconds)
        lines.append(f"| {name} | {first / 1024:.1f} | {end / 1024:.1f} | {grew:+.1%} |")
    return "\n".join(lines)


def summary(rows: list[tuple[str, str]]) -> str:
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"  {name.ljust(width)}  {value}" for name, value in rows)
