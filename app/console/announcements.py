"""Announcement pages: list by state, create, edit, publish now, expire now, delete, body preview.

After a commit that changes what inboxes show, every open socket is told to recount
(publish_broadcast); scheduled ones are announced by jobs/announcements.py when their time comes.
"""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user

from app.console import queries, service
from app.console.forms import AnnouncementForm, aware, local_value
from app.console.markdown import render_body
from app.console.views import bp, operator_zone
from app.extensions import db
from app.realtime.publish import publish_broadcast


def _commit(live_changed: bool, message: str):
    """Commit, then (only then) tell the sockets; back to the list."""
    db.session.commit()
    if live_changed:
        publish_broadcast()
    flash(message, "success")
    return redirect(url_for("console.announcements"))


def _values(form: AnnouncementForm) -> dict:
    zone = operator_zone()
    return dict(
        title=form.title.data or "",
        body=form.body.data or "",
        body_format=form.body_format.data,
        published_at=aware(form.publish_at.data, zone) if form.publish.data == "at" else None,
        expires_at=aware(form.expires_at.data, zone),
    )


@bp.get("/announcements")
def announcements():
    """Active, scheduled and expired announcements."""
    sections = {
        name: queries.announcement_section(name, request.args.get("expired_cursor"))
        for name in ("active", "scheduled", "expired")
    }
    return render_template("console/announcements.html", sections=sections)


@bp.route("/announcements/new", methods=["GET", "POST"])
def new_announcement():
    """Create an announcement: publish now or at a time."""
    form = AnnouncementForm()
    if form.validate_on_submit():
        try:
            live = service.create_announcement(current_user, **_values(form))
        except service.ConsoleError as exc:
            form.form_errors.append(str(exc))
        else:
            return _commit(live, "Announcement published." if live else "Announcement scheduled.")
    return render_template("console/announcement_form.html", form=form, item=None), 422 if form.errors else 200


@bp.route("/announcements/<int:announcement_id>/edit", methods=["GET", "POST"])
def edit_announcement(announcement_id: int):
    """Edit an announcement's words and times."""
    item = queries.announcement(announcement_id)
    if item is None:
        return render_template("console/missing.html", what="announcement"), 404
    form = AnnouncementForm(obj=item)
    if request.method == "GET":
        live = item.published_at <= service.db_now()
        form.publish.data = "now" if live else "at"
        form.publish_at.data = None if live else local_value(item.published_at, operator_zone())
        form.expires_at.data = local_value(item.expires_at, operator_zone())
    elif form.validate_on_submit():
        try:
            changed = service.update_announcement(current_user, announcement_id, **_values(form))
        except service.ConsoleError as exc:
            form.form_errors.append(str(exc))
        else:
            return _commit(changed, "Announcement saved.")
    return render_template("console/announcement_form.html", form=form, item=item), 422 if form.errors else 200


ACTIONS = {
    "publish": (service.publish_announcement, "Announcement published."),
    "expire": (service.expire_announcement, "Announcement expired: it left every inbox."),
    "delete": (service.delete_announcement, "Announcement deleted."),
}


@bp.post("/announcements/<int:announcement_id>/<any(publish, expire, delete):action>")
def announcement_action(announcement_id: int, action: str):
    """Publish a scheduled announcement now, expire a live one now, or delete one."""
    change, message = ACTIONS[action]
    try:
        live_changed = change(current_user, announcement_id)
    except service.ConsoleError as exc:
        flash(str(exc), "error")
        return redirect(url_for("console.announcements"))
    return _commit(live_changed, message)


@bp.post("/announcements/preview")
def preview_announcement():
    """Return the body as inboxes will show it (HTMX fragment for the live preview)."""
    body = request.form.get("body", "")[: service.BODY_MAX]
    return render_template(
        "console/_announcement_preview.html", html=render_body(body, request.form.get("body_format", "plain"))
    )
