"""The end user's inbox: the page (opening it records the last-seen time), its fragments and actions."""

from __future__ import annotations

from datetime import UTC, datetime

from flask import Blueprint, abort, redirect, render_template, request, url_for
from flask_babel import gettext, lazy_gettext, ngettext
from flask_login import current_user, login_required

from app import replicas, timezones
from app.actions import service as actions
from app.clock import db_now
from app.inbox import bulk, queries, service
from app.inbox import snooze as snoozing
from app.links import same_site_path
from app.pagination import Cursor
from app.tenants import queries as tenant_queries
from app.topics import service as topics
from app.unitofwork import commit
from app.web.htmx import is_htmx
from app.web.i18n import content_chain
from app.web.templating import forget_badge_count, localtime

bp = Blueprint("inbox", __name__)

# Opening these lists shows the newest rows, so it records the last-seen time (archived ones do not).
SEEN_FILTERS = ("all", "unread")


@bp.context_processor
def _snooze_menu():
    """What every row's snooze menu shows: the fixed choices and the picker's bounds in the user's zone."""
    if not current_user.is_authenticated:
        return {}
    # Only hints for the browser's picker (the server checks against the database clock), so no query.
    low, high = snoozing.picker_bounds(datetime.now(UTC), timezones.user_zone(current_user))
    return {"snooze_choices": snoozing.CHOICES, "snooze_min": low, "snooze_max": high}


# --- pages ----------------------------------------------------------------------------------------


def _listing_args() -> tuple[str, str | None]:
    filter_name = request.args.get("filter", "all")
    if filter_name not in queries.FILTERS:
        abort(400, gettext("Unknown filter: use all, unread, archived or snoozed."))
    cursor = request.args.get("cursor") or None
    if cursor and Cursor.decode(cursor) is None:
        abort(400, gettext("That page link is not valid any more. Go back to the newest notifications."))
    return filter_name, cursor


def _tenant(values) -> tuple[list, object | None]:
    """The member's tenants, and the one the inbox is narrowed to (`tenant`, a key: issue 32), if any.

    The filter exists only for a member of more than one tenant; a key that is not one of theirs is a 400.
    """
    tenants = tenant_queries.member_tenants(current_user.id) if current_user.role == "member" else []
    key = values.get("tenant") or None
    if key is None:
        return tenants, None
    chosen = next((t for t in tenants if t.key == key), None)
    if chosen is None or len(tenants) < 2:
        abort(400, gettext("You do not belong to that organisation."))
    return tenants, chosen


def _scope(tenant_key: str | None) -> dict:
    """The tenant filter as URL arguments (none without one)."""
    return {"tenant": tenant_key} if tenant_key else {}


def _content_context(filter_name: str, cursor: str | None = None, values=None) -> dict:
    tenants, tenant = _tenant(request.args if values is None else values)
    tenant_id, tenant_key = (tenant.id, tenant.key) if tenant else (None, None)
    show_announcements = filter_name != "archived" and cursor is None
    chain = content_chain(current_user.locale)

    def listing():
        page = queries.notification_page(current_user.id, filter_name, cursor, tenant_id=tenant_id)
        return page, queries.active_announcements(current_user.id, chain=chain) if show_announcements else []

    # A replica may answer (app/replicas.py): this member's own last write is seen either way.
    page, announcements = replicas.read(current_user.id, listing)
    return {
        "page": page,
        "filter_name": filter_name,
        "cursor": cursor,
        "announcements": announcements,
        "next_url": url_for("inbox.index", filter=filter_name, cursor=cursor, **_scope(tenant_key)),
        "tenants": tenants if len(tenants) > 1 else [],
        "tenant_key": tenant_key,
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
        _, tenant = _tenant(request.args)
        tenant_id = tenant.id if tenant else None
        page = replicas.read(
            current_user.id,
            lambda: queries.notification_page(current_user.id, filter_name, cursor, tenant_id=tenant_id),
        )
        tenant_key = tenant.key if tenant else None
        return render_template(
            "inbox/_more.html",
            page=page,
            filter_name=filter_name,
            tenant_key=tenant_key,
            next_url=url_for("inbox.index", filter=filter_name, **_scope(tenant_key)),
        )
    context = _content_context(filter_name, cursor)
    if filter_name in SEEN_FILTERS and cursor is None:
        # After the page was read, so its rows still say which were new since the last visit.
        service.record_seen(current_user.id)
        commit()
    return render_template("inbox/index.html", **context)


@bp.get("/inbox/live")
@login_required
def live():
    """The first page's content alone: the list refreshes its top when a new or re-surfaced row arrives."""
    filter_name, _ = _listing_args()
    if filter_name not in SEEN_FILTERS:
        abort(400, gettext("Only the newest notifications refresh live."))
    return render_template("inbox/_content.html", **_content_context(filter_name))


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


# What each of the three row actions says once done (the row's title filled in).
ACTION_STATUS = {
    "read": lazy_gettext("Marked “%(title)s” read."),
    "archive": lazy_gettext("Archived “%(title)s”."),
    "unarchive": lazy_gettext("Moved “%(title)s” back to the inbox."),
}


ACTION_SENT = lazy_gettext("Sent “%(label)s”.")
ACTION_ALREADY = lazy_gettext("“%(label)s” was already sent.")


def _act(action: str, notification_id: int):
    """Read, archive or unarchive one of the user's notifications (the feed's one handler for them too)."""
    row = service.act_on(current_user.id, notification_id, action) or abort(404)
    return _finish(ACTION_STATUS[action] % {"title": row["title"]}, _row(notification_id))


@bp.post("/inbox/notifications/<int:notification_id>/read")
@login_required
def mark_read(notification_id: int):
    """Mark one notification read (idempotent: the first read_at stays)."""
    return _act("read", notification_id)


@bp.post("/inbox/notifications/<int:notification_id>/archive")
@login_required
def archive(notification_id: int):
    """Archive one notification (it becomes read and moves to the Archived filter)."""
    return _act("archive", notification_id)


@bp.post("/inbox/notifications/<int:notification_id>/unarchive")
@login_required
def unarchive(notification_id: int):
    """Move an archived notification back to the inbox."""
    return _act("unarchive", notification_id)


@bp.post("/inbox/notifications/<int:notification_id>/open")
@login_required
def open_notification(notification_id: int):
    """Mark read, then go to the notification's link if it stays on this site; else back to the inbox."""
    row = service.act_on(current_user.id, notification_id, "read") or abort(404)
    commit()
    target = same_site_path(row["link_path"]) or url_for("inbox.index", _anchor=f"notification-{notification_id}")
    return redirect(target, 303)


@bp.post("/inbox/notifications/<int:notification_id>/actions/<name>")
@login_required
def act(notification_id: int, name: str):
    """Click a named action button (issue 33): the product hears of the first click only; the row is read."""
    done = actions.click(current_user.id, notification_id, name, "inbox") or abort(404)
    status = ACTION_SENT if done.first else ACTION_ALREADY
    return _finish(status % {"label": done.label}, _row(notification_id))


@bp.get("/inbox/notifications/<int:notification_id>/actions")
@login_required
def action_buttons(notification_id: int):
    """The row's buttons alone: a clicked one asks for them until the product's answer shows."""
    return render_template("actions/_buttons.html", n=_own_notification(notification_id), next_url=_back())


@bp.post("/inbox/announcements/<int:announcement_id>/read")
@login_required
def read_announcement(announcement_id: int):
    """Mark one active announcement read (inserts its announcement_reads row once)."""
    chain = content_chain(current_user.locale)
    item = queries.announcement_for(current_user.id, announcement_id, chain) or abort(404)
    service.read_announcement(current_user.id, announcement_id)

    def fragment():
        fresh = queries.announcement_for(current_user.id, announcement_id, chain)
        return render_template("inbox/_announcement.html", a=fresh, next_url=_back())

    return _finish(gettext("Marked “%(title)s” read.", title=item["title"]), fragment)


@bp.post("/inbox/read-all")
@login_required
def read_all():
    """Mark every notification and active announcement read; HTMX gets the refreshed list."""
    filter_name = request.form.get("filter", "all")
    if filter_name not in queries.FILTERS:
        abort(400, gettext("Unknown filter: use all, unread, archived or snoozed."))
    _, tenant = _tenant(request.form)  # narrowed to a tenant: only its notifications
    result = service.read_all(current_user.id, tenant.id if tenant else None)
    status = gettext("Everything is marked read.") if result.changed else gettext("Nothing was unread.")
    return _finish(
        status, lambda: render_template("inbox/_content.html", **_content_context(filter_name, values=request.form))
    )


# --- snooze and mute ------------------------------------------------------------------------------


def _gone():
    """An empty fragment: the row leaves the list it was in (htmx swaps it for nothing)."""
    return ""


def _snooze_refused(row, message: str):
    """Say why the snooze time cannot be used (422): in the row's open menu, or on the snooze page."""
    if is_htmx():
        return render_template("inbox/_row.html", n=row, next_url=_back(), snooze_error=message), 422
    return render_template("inbox/snooze.html", n=row, next_url=_back(), snooze_error=message), 422


@bp.get("/inbox/notifications/<int:notification_id>/snooze")
@login_required
def snooze_page(notification_id: int):
    """The snooze choices on a page of their own (where a refused time is explained without JavaScript)."""
    row = _own_notification(notification_id)
    return render_template("inbox/snooze.html", n=row, next_url=_back(), snooze_error=None)


@bp.post("/inbox/notifications/<int:notification_id>/snooze")
@login_required
def snooze(notification_id: int):
    """Read and hide a notification until a chosen time (a menu choice or a picked date-time)."""
    row = _own_notification(notification_id)
    if row["archived_at"]:
        abort(422, gettext("Move it back to the inbox before snoozing it."))
    try:
        until = snoozing.until_from_form(request.form, db_now(), timezones.user_zone(current_user))
    except snoozing.SnoozeError as exc:
        return _snooze_refused(row, str(exc))
    service.snooze(current_user.id, notification_id, until)
    return _finish(gettext("Snoozed “%(title)s” until %(when)s.", title=row["title"], when=localtime(until)), _gone)


@bp.post("/inbox/notifications/<int:notification_id>/unsnooze")
@login_required
def unsnooze(notification_id: int):
    """Wake a snoozed notification now: it is back on top of the inbox, unread."""
    row = _own_notification(notification_id)
    changed = service.unsnooze(current_user.id, notification_id)
    if changed:
        status = gettext("“%(title)s” is back in your inbox.", title=row["title"])
    else:
        status = gettext("“%(title)s” was not snoozed.", title=row["title"])
    return _finish(status, _gone)


@bp.post("/inbox/notifications/<int:notification_id>/unfollow")
@login_required
def unfollow(notification_id: int):
    """Stop following the topic the notification came from (the user's own subscription only)."""
    row = _own_notification(notification_id)
    if not row["followed_topic"]:
        abort(422, gettext("This notification did not come from a topic you follow."))
    key, name = row["followed_topic"]
    topics.unfollow(current_user.id, key)
    return _finish(gettext("You no longer follow %(topic)s.", topic=name), _row(notification_id))


@bp.post("/inbox/notifications/<int:notification_id>/mute")
@login_required
def mute(notification_id: int):
    """Mute the notification's thread: later ones in it arrive read and hidden (its rows so far stay)."""
    row = _own_notification(notification_id)
    if not row["mutable"]:
        abort(422, gettext("This notification is not part of a thread that can be muted."))
    service.mute(current_user.id, notification_id)
    return _finish(
        gettext("Muted the thread of “%(title)s”. Unmute it in Preferences.", title=row["title"]), _row(notification_id)
    )


# --- bulk actions (issue 33) ----------------------------------------------------------------------


def _bulk_status(action: str, count: int) -> str:
    """What a bulk action did, for the live region (and the toast): "3 notifications archived"."""
    if action == "read":
        return ngettext("%(num)d notification marked read", "%(num)d notifications marked read", count)
    if action == "archive":
        return ngettext("%(num)d notification archived", "%(num)d notifications archived", count)
    return ngettext("%(num)d notification deleted", "%(num)d notifications deleted", count)


def _bulk_ids(values) -> list[int]:
    raw = values.getlist("ids")
    if len(raw) > bulk.max_ids():
        abort(422, _too_many())
    try:
        return [int(v) for v in raw]
    except ValueError:
        abort(400, gettext("A selected notification id is not a number. Reload the page and try again."))


def _too_many() -> str:
    return gettext(
        "Select at most %(max)d notifications at once, or use “Archive all” or “Delete all read”.", max=bulk.max_ids()
    )


def _bulk_answer(status: str, filter_name: str, undo_token: str | None = None):
    """Commit once, then answer HTMX with the refreshed list, the status, the badge and (if any) the undo toast."""
    commit()
    if not is_htmx():
        return redirect(_back(), 303)
    forget_badge_count()
    context = _content_context(filter_name, values=request.form)
    content = render_template("inbox/_content.html", **context)
    answer = content + render_template("inbox/_status.html", status=status) + render_template("_badge.html", oob=True)
    if undo_token:
        seconds = bulk.undo_seconds()
        answer += render_template("inbox/_undo_toast.html", **context, status=status, token=undo_token, seconds=seconds)
    return answer


@bp.post("/inbox/bulk")
@login_required
def bulk_action():
    """Mark read, archive or delete the selected rows (ids), or with all=1 the whole list (delete: its read rows)."""
    action = request.form.get("action")
    if action not in bulk.ACTIONS:
        abort(400, gettext("Unknown action: use read, archive or delete."))
    filter_name = request.form.get("filter", "all")
    if filter_name not in queries.FILTERS:
        abort(400, gettext("Unknown filter: use all, unread, archived or snoozed."))
    _, tenant = _tenant(request.form)  # narrowed to a tenant: only its notifications
    tenant_id = tenant.id if tenant else None
    if request.form.get("all") == "1":
        if filter_name not in bulk.ALL_FILTERS:
            abort(422, gettext("Snoozed notifications cannot be changed all at once."))
        result = bulk.act_on_all(current_user.id, action, filter_name, tenant_id)
    else:
        ids = _bulk_ids(request.form)
        if not ids:
            abort(422, gettext("Select at least one notification first."))
        try:
            result = bulk.act_on_ids(current_user.id, action, ids, tenant_id)
        except bulk.TooManyIds:
            abort(422, _too_many())
    status = _bulk_status(action, result.count) if result.count else gettext("Nothing needed changing.")
    return _bulk_answer(status, filter_name, result.token)


@bp.post("/inbox/undo")
@login_required
def undo():
    """Put back exactly the rows one bulk action changed (the member's own token, within its time)."""
    filter_name = request.form.get("filter", "all")
    if filter_name not in queries.FILTERS:
        abort(400, gettext("Unknown filter: use all, unread, archived or snoozed."))
    token = request.form.get("token", "")
    restored = bulk.undo(current_user.id, token) if 0 < len(token) <= 64 else 0
    if restored:
        status = ngettext("Undone: %(num)d notification is back.", "Undone: %(num)d notifications are back.", restored)
    else:
        status = gettext("Too late to undo: that change is final now.")
    return _bulk_answer(status, filter_name)
