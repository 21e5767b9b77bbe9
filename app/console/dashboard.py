"""The delivery dashboard: status windows, a per-minute chart, latency, queues, DLQ, providers, workers.

The page embeds one fragment that re-fetches itself every 5 seconds (htmx), so it stays current
without a reload; the chart is server-rendered SVG (app/console/charts.py).
"""

from __future__ import annotations

from flask import current_app, render_template

from app.console import charts, dashboard_queries
from app.console.views import bp, operator_zone
from app.extensions import db


def _figures() -> dict:
    now_minute, counts = dashboard_queries.per_minute()
    figures = {
        "windows": dashboard_queries.status_windows(),
        "chart": charts.deliveries_per_minute(now_minute, counts, operator_zone()),
        "latency": dashboard_queries.latency(),
        "dlq": dashboard_queries.dlq(),
        "providers": dashboard_queries.provider_states(current_app.config),
    }
    db.session.rollback()  # end the read before the slower Redis calls
    return figures | {"redis": dashboard_queries.redis_state(), "statuses": charts.STATUS_ORDER}


@bp.get("/dashboard")
def dashboard():
    """The dashboard page (its figures refresh every 5 seconds)."""
    return render_template("console/dashboard.html", **_figures())


@bp.get("/dashboard/live")
def dashboard_live():
    """The dashboard's figures as a fragment."""
    return render_template("console/_dashboard_live.html", **_figures())


@bp.app_template_filter("duration")
def duration(seconds: float | None) -> str:
    """Say a number of seconds the way an operator reads it: 850 ms, 4.2 s, 3 min 5 s, 2 h 10 min, 3 d 4 h."""
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"
