"""Every Jinja filter and global, registered once for every template (pages, fragments, frames, e-mail).

Times are shown in the reader's own zone: the signed-in user's (an operator's, in the console), or
DEFAULT_TIMEZONE for a visitor. Links go through the same-site rule before they become an href.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from flask import Flask, current_app, has_request_context, request
from flask_babel import gettext, lazy_gettext
from flask_login import current_user
from markupsafe import Markup

from app import i18n
from app.announcements.markdown import announcement_html
from app.audit.queries import changed_fields
from app.delivery.channels import channel_labels, member_channels
from app.inbox import queries as inbox_queries
from app.links import same_site_path
from app.preferences.queries import SOURCE_LABELS
from app.timezones import user_zone
from app.web.i18n import current_language

JUST_NOW = lazy_gettext("just now")  # looked up only for the rows under a minute old
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
    """An instant in the reader's zone and language, e.g. "Sat, Sep 26, 2026, 9:00 AM JST"."""
    return i18n.local_datetime(value, reader_zone(), current_language())


def reltime(value: datetime, now: datetime | None = None) -> str:
    """How long ago value was ("5 minutes ago" / "5分前") within a week; older ones get a short local date."""
    return i18n.relative(value, reader_zone(), current_language(), now, just_now=JUST_NOW)


def console_time(value: datetime | None) -> Markup:
    """A timestamp in the operator's zone (2026-11-29 14:05 JST), its UTC value on hover and for machines."""
    if value is None:
        return Markup("—")
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        value.astimezone(UTC).isoformat(), i18n.utc_datetime(value), i18n.numeric_datetime(value, reader_zone())
    )


def console_text(value: datetime | None) -> str:
    """The same timestamp as plain text, for attributes and labels (2026-11-29 14:05 JST)."""
    return "—" if value is None else i18n.numeric_datetime(value, reader_zone())


def number(value: int | float) -> str:
    """A count with the reader's grouping (12,345)."""
    return i18n.number(value, current_language())


def duration(seconds: float | None) -> str:
    """A number of seconds the way an operator reads it: 850 ms, 4.2 s, 3 min 5 s, 2 h 10 min, 3 d 4 h."""
    if seconds is None:
        return "—"
    if seconds < 1:
        return gettext("%(n).0f ms", n=seconds * 1000)
    if seconds < 60:
        return gettext("%(n).1f s", n=seconds)
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return gettext("%(m)s min %(s)s s", m=minutes, s=secs)
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return gettext("%(h)s h %(m)s min", h=hours, m=minutes)
    days, hours = divmod(hours, 24)
    return gettext("%(d)s d %(h)s h", d=days, h=hours)


def audit_changes(entry) -> list:
    """(field, before, after) rows for an audit entry, only the fields that changed."""
    return changed_fields(entry["before"], entry["after"])


FILTERS = {
    "announcement_html": announcement_html,
    "audit_changes": audit_changes,
    "badge_text": badge_text,
    "console_text": console_text,
    "console_time": console_time,
    "duration": duration,
    "localtime": localtime,
    "number": number,
    "reltime": reltime,
    "safe_link": same_site_path,
}


def page_globals() -> dict:
    """What every template may use: navigation, the preference labels, and the reader's badge count."""
    values = {
        "nav_endpoints": current_app.view_functions.keys(),
        "oob": False,
        # Only the channels this installation can send on get a column (app/delivery/channels).
        "channels": [channel.name for channel in member_channels(current_app.config)],
        "channel_labels": channel_labels(),
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
