"""The delivery dashboard: ledger windows and chart, latency, queues and backpressure, DLQ, providers, workers.

The page embeds one fragment that re-fetches itself every 5 seconds (htmx), so it stays current
without a reload; the chart is server-rendered SVG (app/console/charts.py).
"""

from __future__ import annotations

from flask import current_app, render_template

from app import backpressure
from app.console import charts
from app.console.blueprint import bp, operator_zone
from app.delivery import stats, switches
from app.delivery.channels import all_channels
from app.extensions import db
from app.providers import problems
from app.providers.status import provider_states
from app.queue_state import redis_state


def _figures() -> dict:
    now_minute, counts = stats.per_minute()
    figures = {
        "windows": stats.status_windows(),
        "chart": charts.deliveries_per_minute(now_minute, counts, operator_zone()),
        "latency": stats.latency(),
        "dlq": stats.dlq(),
        "providers": provider_states(current_app.config, [c.name for c in all_channels() if c.delivers]),
        "paused": switches.read(),  # the kill switches thrown, and what waits for them
        "waiting": switches.waiting(),
    }
    names = sorted({p.name for p in figures["providers"] if p.configured})
    db.session.rollback()  # end the read before the slower Redis calls
    return figures | {"redis": redis_state(), "pressure": backpressure.status(), "statuses": charts.STATUS_ORDER,
                      "provider_problems": problems.current(names)}  # fmt: skip


@bp.get("/dashboard")
def dashboard():
    """The dashboard page (its figures refresh every 5 seconds)."""
    return render_template("console/dashboard.html", **_figures())


@bp.get("/dashboard/live")
def dashboard_live():
    """The dashboard's figures as a fragment."""
    return render_template("console/_dashboard_live.html", **_figures())
