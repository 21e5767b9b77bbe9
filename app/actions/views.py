"""Action links out of e-mails and pushes (issue 33): a confirm page (GET), the action itself (POST).

The signed token in the URL names the member, the notification and the action (app/actions/signing.py), so
the page works without a session, as an e-mail's unsubscribe link does. A GET only shows what will happen: mail
scanners that fetch every link act on nothing. The form's POST carries the page's CSRF token. A push's
notificationclick posts from the service worker (POST /actions/<token>/push), with the member's session and
no CSRF token: the signed token, bound to that member, is what a forged cross-site request cannot know, and
the session must be the token's member.
"""

from __future__ import annotations

from flask import Blueprint, abort, current_app, jsonify, render_template, request
from flask_babel import gettext
from flask_login import current_user

from app.actions import queries, service, signing
from app.extensions import csrf
from app.unitofwork import commit

bp = Blueprint("actions", __name__)


@bp.app_context_processor
def _buttons():
    """action_buttons(row): a list row's buttons as its member sees them (templates/actions/_buttons.html)."""
    return {"action_buttons": lambda row: queries.row_buttons(row, current_app.config["DEFAULT_LOCALE"])}


def _target(token: str):
    """The link's member, notification and stored action; 404 when forged or gone, 410 when expired."""
    try:
        target = signing.read_token(token)
    except signing.Expired:
        abort(410, gettext("This link has expired. Open the notification in your inbox instead."))
    row = queries.target(target.user_id, target.notification_id) if target else None
    button = queries.find(row["actions"], target.name) if row else None
    if button is None:
        abort(404)
    return target, row, button


def _page(target, row, button, done=None, status: int = 200):
    label = queries.label_for(button, row["locale"], current_app.config["DEFAULT_LOCALE"])
    found = queries.state(target.user_id, target.notification_id, target.name)
    page = render_template("actions/confirm.html", title=row["title"], label=label, done=done,
                           state=found.state if found else None, clicked=bool(found and found.clicked_at))  # fmt: skip
    return page, status


@bp.get("/actions/<token>")
def confirm(token: str):
    """Show what the button will do, and a button that does it (nothing happens on a GET)."""
    return _page(*_target(token))


@bp.post("/actions/<token>")
def act(token: str):
    """Do the action (once: a second POST sends nothing) and show its state."""
    target, row, button = _target(token)
    done = service.click(target.user_id, target.notification_id, target.name, "email", visible_only=False)
    commit()
    return _page(target, row, button, done)


@bp.post("/actions/<token>/push")
@csrf.exempt
def push(token: str):
    """A push's action button, posted by the service worker with the member's session (JSON answer)."""
    target, _row, _button = _target(token)
    if not current_user.is_authenticated or current_user.id != target.user_id:
        abort(403)
    if request.headers.get("Sec-Fetch-Site", "same-origin") != "same-origin":
        abort(403)  # only this site's own service worker
    done = service.click(target.user_id, target.notification_id, target.name, "push", visible_only=False)
    commit()
    return jsonify(first=done.first, state=done.state)
