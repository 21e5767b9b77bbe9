"""The console blueprint: the role gate for every /console URL, the dashboard, shared filters.

Each page lives in its own module (announcements, types, templates_, suppressions, keys, users,
auditlog); importing them at the bottom registers their routes on this one blueprint.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from flask import Blueprint, abort, render_template
from flask_login import current_user

from app.console import queries
from app.extensions import login

bp = Blueprint("console", __name__, url_prefix="/console")


@bp.before_request
def require_operator():
    """Anonymous visitors go to sign-in; members get 403; admin-only pages check again."""
    if not current_user.is_authenticated:
        return login.unauthorized()
    if not current_user.is_operator:
        abort(403)
    return None


def operator_zone() -> ZoneInfo:
    """The signed-in operator's time zone (forms and pages speak it), UTC when unknown."""
    try:
        return ZoneInfo(getattr(current_user, "timezone", None) or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


@bp.app_template_filter("console_time")
def console_time(value: datetime | None) -> str:
    """Format a timestamp in the operator's zone, e.g. 2026-11-29 14:05 JST."""
    if value is None:
        return "—"
    return value.astimezone(operator_zone()).strftime("%Y-%m-%d %H:%M %Z")


@bp.get("/")
def index():
    """The landing page: what is live, what is scheduled, what changed last."""
    return render_template(
        "console/index.html", summary=queries.dashboard_summary(), recent=queries.audit_page(limit=10).rows
    )


from app.console import (  # noqa: E402,F401 - registers the page routes on bp
    announcements,
    auditlog,
    campaigns,
    dashboard,
    deliveries,
    dlq,
    keys,
    suppressions,
    templates_,
    types,
    users,
)
