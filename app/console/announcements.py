"""Announcement pages: list by state, create, edit, publish now, expire now, delete, body preview.

After a commit that changes what inboxes show, every open socket is told to recount
(a broadcast the service registers); scheduled ones are announced by the sweeper when their time comes.
"""

from __future__ import annotations

from flask import render_template, request, url_for
from flask_babel import gettext, lazy_gettext
from flask_login import current_user

from app.announcements import queries, service
from app.announcements.markdown import render_body
from app.clock import db_now
from app.console.actions import run_action
from app.console.blueprint import bp, operator_zone
from app.console.forms import AnnouncementForm, fill_variants, variants_of
from app.console.listing import ListArgs
from app.limits import OPERATOR_BODY_MAX
from app.timezones import aware, local_value


def _values(form: AnnouncementForm) -> dict:
    zone = operator_zone()
    return dict(
        title=form.title.data or "",
        body=form.body.data or "",
        body_format=form.body_format.data,
        published_at=aware(form.publish_at.data, zone) if form.publish.data == "at" else None,
        expires_at=aware(form.expires_at.data, zone),
        locales=variants_of(form),
    )


STATE_LABELS = {
    "active": lazy_gettext("Live now"),
    "scheduled": lazy_gettext("Scheduled"),
    "expired": lazy_gettext("Expired"),
}


@bp.get("/announcements")
def announcements():
    """Active, scheduled and expired announcements; search by words, narrow by state and format."""
    lf = ListArgs(request.args)
    q = lf.text("q")
    state = lf.choice("state", queries.SECTIONS, gettext("state"))
    body_format = lf.choice("format", queries.BODY_FORMATS, gettext("format"))
    sections = {
        name: queries.announcement_section(name, request.args.get("expired_cursor"), q=q, body_format=body_format)
        for name in queries.SECTIONS
        if not state or name == state
    }
    return render_template(
        "console/announcements.html",
        sections=sections,
        lf=lf,
        state_labels=STATE_LABELS,
    )


@bp.route("/announcements/new", methods=["GET", "POST"])
def new_announcement():
    """Create an announcement: publish now or at a time."""
    form = AnnouncementForm()
    if form.validate_on_submit():
        done = run_action(
            lambda: service.create_announcement(current_user, **_values(form)),
            success=lambda live: gettext("Announcement published.") if live else gettext("Announcement scheduled."),
            redirect_to=url_for("console.announcements"),
            form=form,
        )
        if done is not None:
            return done
    return render_template("console/announcement_form.html", form=form, item=None), 422 if form.errors else 200


@bp.route("/announcements/<int:announcement_id>/edit", methods=["GET", "POST"])
def edit_announcement(announcement_id: int):
    """Edit an announcement's words (the base text beside each language's variant) and times."""
    item = queries.announcement(announcement_id)
    if item is None:
        return render_template("console/missing.html", what="announcement"), 404
    form = AnnouncementForm(obj=item)
    if request.method == "GET":
        live = item.published_at <= db_now()
        form.publish.data = "now" if live else "at"
        form.publish_at.data = None if live else local_value(item.published_at, operator_zone())
        form.expires_at.data = local_value(item.expires_at, operator_zone())
        fill_variants(form, item.locales)
    elif form.validate_on_submit():
        done = run_action(
            lambda: service.update_announcement(current_user, announcement_id, **_values(form)),
            success=gettext("Announcement saved."),
            redirect_to=url_for("console.announcements"),
            form=form,
        )
        if done is not None:
            return done
    return render_template("console/announcement_form.html", form=form, item=item), 422 if form.errors else 200


ACTIONS = {
    "publish": (service.publish_announcement, lazy_gettext("Announcement published.")),
    "expire": (service.expire_announcement, lazy_gettext("Announcement expired: it left every inbox.")),
    "delete": (service.delete_announcement, lazy_gettext("Announcement deleted.")),
}


@bp.post("/announcements/<int:announcement_id>/<any(publish, expire, delete):action>")
def announcement_action(announcement_id: int, action: str):
    """Publish a scheduled announcement now, expire a live one now, or delete one."""
    change, message = ACTIONS[action]
    # The sockets hear of a live change after the commit.
    return run_action(
        lambda: change(current_user, announcement_id), success=message, redirect_to=url_for("console.announcements")
    )


@bp.post("/announcements/preview")
def preview_announcement():
    """Return the body as inboxes will show it (HTMX fragment for the live preview)."""
    body = request.form.get("body", "")[:OPERATOR_BODY_MAX]
    return render_template(
        "console/_announcement_preview.html", html=render_body(body, request.form.get("body_format", "plain"))
    )
