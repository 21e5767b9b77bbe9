"""The end user's inbox: the page, its HTMX fragments and the read/archive actions."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from flask import Blueprint, abort, current_app, has_request_context, redirect, render_template, request, url_for
from flask_login import current_user, login_required

from app.extensions import db
from app.inbox import queries, service
from app.realtime.publish import publish_badge

bp = Blueprint("inbox", __name__)
BADGE_KEY = "hato.badge_count"


@bp.app_context_processor
def inject_badge():
    """Give every page the signed-in user's badge count for the header (one query per request)."""
    if not has_request_context() or not current_user.is_authenticated:
        return {}
    # Cached in the WSGI environ, which lives exactly one request (g may outlive it in tests).
    if BADGE_KEY not in request.environ:
        request.environ[BADGE_KEY] = queries.badge_count(current_user.id)
    return {"badge_count": request.environ[BADGE_KEY]}


# --- presentation helpers: links and times --------------------------------------------------------


@bp.app_template_filter("safe_link")
def safe_path(target: str | None) -> str | None:
    """Return target only if it is a same-site relative path (never //host, a scheme or a backslash)."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return None
    # Browsers drop tabs/newlines and read "\" as "/", so "/\t/evil" or "/\evil" would leave the site.
    if "\\" in target or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in target):
        return None
    parts = urlsplit(target)
    return None if parts.scheme or parts.netloc else target


@lru_cache(maxsize=256)
def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def _user_zone() -> ZoneInfo:
    name = current_user.timezone if current_user.is_authenticated else current_app.config["DEFAULT_TIMEZONE"]
    return _zone(name or "UTC")


@bp.app_template_filter("localtime")
def localtime(value: datetime) -> str:
    """Format an instant in the user's timezone, e.g. "Sat 26 Sep 2026, 09:00 JST"."""
    return value.astimezone(_user_zone()).strftime("%a %d %b %Y, %H:%M %Z")


@bp.app_template_filter("reltime")
def reltime(value: datetime, now: datetime | None = None) -> str:
    """Say how long ago value was ("5 min ago") within a week; older ones get a short local date."""
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
    local = value.astimezone(_user_zone())
    return local.strftime("%d %b" if local.year == now.astimezone(_user_zone()).year else "%d %b %Y")


# --- pages ----------------------------------------------------------------------------------------


def _is_htmx() -> bool:
    return request.headers.get("HX-Request") == "true"


def _listing_args() -> tuple[str, str | None]:
    filter_name = request.args.get("filter", "all")
    if filter_name not in queries.FILTERS:
        abort(400, "Unknown filter: use all, unread or archived.")
    cursor = request.args.get("cursor") or None
    if cursor and queries.Cursor.decode(cursor) is None:
        abort(400, "That page link is not valid any more. Go back to the newest notifications.")
    return filter_name, cursor


def _content_context(filter_name: str, cursor: str | None = None) -> dict:
    page = queries.notification_page(current_user.id, filter_name, cursor)
    show_announcements = filter_name != "archived" and cursor is None
    announcements = queries.active_announcements(current_user.id) if show_announcements else []
    return {
        "page": page,
        "filter_name": filter_name,
        "cursor": cursor,
        "announcements": announcements,
        "next_url": url_for("inbox.index", filter=filter_name, cursor=cursor),
    }


@bp.get("/")
@login_required
def home():
    """The inbox is the home page."""
    return index()


@bp.get("/inbox")
@login_required
def index():
    """Show announcements and one keyset page of notifications; "load more" gets only the rows."""
    filter_name, cursor = _listing_args()
    if cursor and _is_htmx():
        page = queries.notification_page(current_user.id, filter_name, cursor)
        return render_template(
            "inbox/_more.html", page=page, filter_name=filter_name, next_url=url_for("inbox.index", filter=filter_name)
        )
    return render_template("inbox/index.html", **_content_context(filter_name, cursor))


@bp.get("/inbox/badge")
@login_required
def badge():
    """Return the badge fragment alone."""
    return render_template("_badge.html")


# --- actions --------------------------------------------------------------------------------------


def _own_notification(notification_id: int):
    return queries.notification_for(current_user.id, notification_id) or abort(404)


def _back() -> str:
    return safe_path(request.form.get("next")) or url_for("inbox.index")


def _finish(changed: bool, status: str, fragment):
    """Commit once, tell the user's other tabs, then answer HTMX with fragment + OOB badge, or redirect."""
    db.session.commit()
    if changed:
        publish_badge([current_user.id])
    if not _is_htmx():
        return redirect(_back(), 303)
    request.environ.pop(BADGE_KEY, None)
    return fragment() + render_template("inbox/_status.html", status=status) + render_template("_badge.html", oob=True)


def _row(notification_id: int):
    def fragment():
        row = queries.notification_for(current_user.id, notification_id)
        return render_template("inbox/_row.html", n=row, next_url=_back())

    return fragment


@bp.post("/inbox/notifications/<int:notification_id>/read")
@login_required
def mark_read(notification_id: int):
    """Mark one notification read (idempotent: the first read_at stays)."""
    row = _own_notification(notification_id)
    changed = service.mark_read(current_user.id, notification_id)
    return _finish(changed, f"Marked “{row['title']}” read.", _row(notification_id))


@bp.post("/inbox/notifications/<int:notification_id>/archive")
@login_required
def archive(notification_id: int):
    """Archive one notification (it becomes read and moves to the Archived filter)."""
    row = _own_notification(notification_id)
    changed = service.archive(current_user.id, notification_id)
    return _finish(changed, f"Archived “{row['title']}”.", _row(notification_id))


@bp.post("/inbox/notifications/<int:notification_id>/unarchive")
@login_required
def unarchive(notification_id: int):
    """Move an archived notification back to the inbox."""
    row = _own_notification(notification_id)
    changed = service.unarchive(current_user.id, notification_id)
    return _finish(changed, f"Moved “{row['title']}” back to the inbox.", _row(notification_id))


@bp.post("/inbox/notifications/<int:notification_id>/open")
@login_required
def open_notification(notification_id: int):
    """Mark read, then go to the notification's link if it stays on this site; else back to the inbox."""
    row = _own_notification(notification_id)
    changed = service.mark_read(current_user.id, notification_id)
    db.session.commit()
    if changed:
        publish_badge([current_user.id])
    target = safe_path(row["link_path"]) or url_for("inbox.index", _anchor=f"notification-{notification_id}")
    return redirect(target, 303)


@bp.post("/inbox/announcements/<int:announcement_id>/read")
@login_required
def read_announcement(announcement_id: int):
    """Mark one active announcement read (inserts its announcement_reads row once)."""
    item = queries.announcement_for(current_user.id, announcement_id) or abort(404)
    changed = service.read_announcement(current_user.id, announcement_id)

    def fragment():
        fresh = queries.announcement_for(current_user.id, announcement_id)
        return render_template("inbox/_announcement.html", a=fresh, next_url=_back())

    return _finish(changed, f"Marked “{item['title']}” read.", fragment)


@bp.post("/inbox/read-all")
@login_required
def read_all():
    """Mark every notification and active announcement read; HTMX gets the refreshed list."""
    filter_name = request.form.get("filter", "all")
    if filter_name not in queries.FILTERS:
        abort(400, "Unknown filter: use all, unread or archived.")
    result = service.read_all(current_user.id)
    status = "Everything is marked read." if result.changed else "Nothing was unread."
    return _finish(
        result.changed, status, lambda: render_template("inbox/_content.html", **_content_context(filter_name))
    )
