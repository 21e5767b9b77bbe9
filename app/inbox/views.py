"""The end user's inbox: the page, its HTMX fragments and the read/archive actions."""

from __future__ import annotations

from flask import Blueprint, abort, redirect, render_template, request, url_for
from flask_login import current_user, login_required

from app.inbox import queries, service
from app.links import same_site_path
from app.pagination import Cursor
from app.unitofwork import commit
from app.web.htmx import is_htmx
from app.web.templating import forget_badge_count

bp = Blueprint("inbox", __name__)


# --- pages ----------------------------------------------------------------------------------------


def _listing_args() -> tuple[str, str | None]:
    filter_name = request.args.get("filter", "all")
    if filter_name not in queries.FILTERS:
        abort(400, "Unknown filter: use all, unread or archived.")
    cursor = request.args.get("cursor") or None
    if cursor and Cursor.decode(cursor) is None:
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
    if cursor and is_htmx():
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
    return same_site_path(request.form.get("next")) or url_for("inbox.index")


def _finish(status: str, fragment):
    """Commit once (the user's other tabs hear of it after), then answer HTMX with fragment + OOB badge."""
    commit()
    if not is_htmx():
        return redirect(_back(), 303)
    forget_badge_count()
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
    service.mark_read(current_user.id, notification_id)
    return _finish(f"Marked “{row['title']}” read.", _row(notification_id))


@bp.post("/inbox/notifications/<int:notification_id>/archive")
@login_required
def archive(notification_id: int):
    """Archive one notification (it becomes read and moves to the Archived filter)."""
    row = _own_notification(notification_id)
    service.archive(current_user.id, notification_id)
    return _finish(f"Archived “{row['title']}”.", _row(notification_id))


@bp.post("/inbox/notifications/<int:notification_id>/unarchive")
@login_required
def unarchive(notification_id: int):
    """Move an archived notification back to the inbox."""
    row = _own_notification(notification_id)
    service.unarchive(current_user.id, notification_id)
    return _finish(f"Moved “{row['title']}” back to the inbox.", _row(notification_id))


@bp.post("/inbox/notifications/<int:notification_id>/open")
@login_required
def open_notification(notification_id: int):
    """Mark read, then go to the notification's link if it stays on this site; else back to the inbox."""
    row = _own_notification(notification_id)
    service.mark_read(current_user.id, notification_id)
    commit()
    target = same_site_path(row["link_path"]) or url_for("inbox.index", _anchor=f"notification-{notification_id}")
    return redirect(target, 303)


@bp.post("/inbox/announcements/<int:announcement_id>/read")
@login_required
def read_announcement(announcement_id: int):
    """Mark one active announcement read (inserts its announcement_reads row once)."""
    item = queries.announcement_for(current_user.id, announcement_id) or abort(404)
    service.read_announcement(current_user.id, announcement_id)

    def fragment():
        fresh = queries.announcement_for(current_user.id, announcement_id)
        return render_template("inbox/_announcement.html", a=fresh, next_url=_back())

    return _finish(f"Marked “{item['title']}” read.", fragment)


@bp.post("/inbox/read-all")
@login_required
def read_all():
    """Mark every notification and active announcement read; HTMX gets the refreshed list."""
    filter_name = request.form.get("filter", "all")
    if filter_name not in queries.FILTERS:
        abort(400, "Unknown filter: use all, unread or archived.")
    result = service.read_all(current_user.id)
    status = "Everything is marked read." if result.changed else "Nothing was unread."
    return _finish(status, lambda: render_template("inbox/_content.html", **_content_context(filter_name)))
