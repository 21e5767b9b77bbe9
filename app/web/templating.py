"""Every Jinja filter and global, registered once for every template (pages, fragments, frames, e-mail).

Times are shown in the reader's own zone: the signed-in user's (an operator's, in the console), or
DEFAULT_TIMEZONE for a visitor. Links go through the same-site rule before they become an href.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from flask import Flask, current_app, has_request_context, request
from flask_login import current_user

from app.announcements.markdown import announcement_html
from app.audit.queries import changed_fields
from app.inbox import queries as inbox_queries
from app.links import same_site_path
from app.models import CHANNELS
from app.preferences.queries import CHANNEL_LABELS, SOURCE_LABELS
from app.timezones import user_zone

BADGE_KEY = "hato.badge_count"  # the request's badge count, kept in the WSGI environ


def reader_zone() -> ZoneInfo:
    """The zone of whoever reads the page: the signed-in user's, else DEFAULT_TIMEZONE."""
    signed_in = has_request_context() and current_user.is_authenticated
    return user_zone(current_user if signed_in else None, current_app.config["DEFAULT_TIMEZONE"])


def badge_text(count: int) -> str:
    """What the badge shows: nothing for zero, the number, or 99+."""
    if count <= 0:
        return ""
    return "99+" if count > 99 else str(count)


def localtime(value: datetime) -> str:
    """An instant in the reader's zone, e.g. "Sat 26 Sep 2026, 09:00 JST"."""
    return value.astimezone(reader_zone()).strftime("%a %d %b %Y, %H:%M %Z")


def reltime(value: datetime, now: datetime | None = None) -> str:
    """How long ago value was ("5 min ago") within a week; older ones get a short local date."""
    now = now or datetime.now(UTC)
    seconds = (now - value).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    if seconds < 7 * 86400:
        days = int(seconds // 86400)
        return "yesterday" if days == 1 else f"{days} days ago"
    zone = reader_zone()
    local = value.astimezone(zone)
    return local.strftime("%d %b" if local.year == now.astimezone(zone).year else "%d %b %Y")


def console_time(value: datetime | None) -> str:
    """A timestamp in the operator's zone, e.g. 2026-11-29 14:05 JST."""
    if value is None:
        return "—"
    return value.astimezone(reader_zone()).strftime("%Y-%m-%d %H:%M %Z")


def duration(seconds: float | None) -> str:
    """A number of seconds the way an operator reads it: 850 ms, 4.2 s, 3 min 5 s, 2 h 10 min, 3 d 4 h."""
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


def audit_changes(entry) -> list:
    """(field, before, after) rows for an audit entry, only the fields that changed."""
    return changed_fields(entry["before"], entry["after"])


FILTERS = {
    "announcement_html": announcement_html,
    "audit_changes": audit_changes,
    "badge_text": badge_text,
    "console_time": console_time,
    "duration": duration,
    "localtime": localtime,
    "reltime": reltime,
    "safe_link": same_site_path,
}


def page_globals() -> dict:
    """What every template may use: navigation, the preference labels, and the reader's badge count."""
    values = {
        "nav_endpoints": current_app.view_functions.keys(),
        "oob": False,
        "channels": CHANNELS,
        "channel_labels": CHANNEL_LABELS,
        "source_labels": SOURCE_LABELS,
    }
    if has_request_context() and current_user.is_authenticated:
        # One query per request, kept in the WSGI environ (which lives exactly one request; g may outlive it).
        if BADGE_KEY not in request.environ:
            request.environ[BADGE_KEY] = inbox_queries.badge_count(current_user.id)
        values["badge_count"] = request.environ[BADGE_KEY]
    return values


def forget_badge_count() -> None:
    """Count the badge again for the rest of this request (after an action changed it)."""
    request.environ.pop(BADGE_KEY, None)


def init_app(app: Flask) -> None:
    """Register the filters and the globals."""
    for name, function in FILTERS.items():
        app.add_template_filter(function, name)
    app.context_processor(page_globals)
