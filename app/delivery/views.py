"""One-click unsubscribe (RFC 8058): GET shows a confirmation and changes nothing; POST acts.

The POST carries no cookie and no CSRF token (mail clients send it on the user's behalf), so the
view is CSRF-exempt; the HMAC-signed token in the URL is what authorises it. The page speaks the
language the e-mail did (the token's user's saved one), else the browser's.
"""

from __future__ import annotations

from contextlib import nullcontext

from flask import Blueprint, render_template
from flask_babel import force_locale

from app.delivery import queries, service
from app.delivery.unsubscribe import read_token
from app.extensions import csrf, limiter
from app.i18n import ui_language
from app.unitofwork import commit
from app.users.queries import user_by_id

bp = Blueprint("delivery", __name__)


def _invalid():
    return render_template("delivery/unsubscribe.html", state="invalid"), 404


def _in_their_language(user_id: int, state: str, label: str, token: str):
    """The page in the recipient's saved language (the visitor may not be signed in), else the request's."""
    user = user_by_id(user_id)
    language = ui_language(user.locale) if user is not None else None
    with force_locale(language) if language else nullcontext():
        return render_template("delivery/unsubscribe.html", state=state, label=label, token=token)


def _invalid_token(response) -> bool:
    return response.status_code == 404


# Only invalid tokens count, per client address and across GET and POST: someone guessing tokens stops,
# while a mail provider that posts many people's real one-click unsubscribes from one address does not.
_guessing_limit = limiter.shared_limit("30 per minute", scope="unsubscribe", deduct_when=_invalid_token)


@bp.get("/unsubscribe/<token>")
@_guessing_limit
def unsubscribe_confirm(token: str):
    """Show what the link would turn off, with a button that POSTs to the same URL."""
    target = read_token(token)
    info = queries.unsubscribe_info(target.user_id, target.type) if target else None
    if info is None:
        return _invalid()
    state = "mandatory" if info.mandatory else ("confirm" if info.email_on else "already")
    return _in_their_language(target.user_id, state, info.label, token)


@bp.post("/unsubscribe/<token>")
@csrf.exempt
@_guessing_limit
def unsubscribe(token: str):
    """Turn e-mail off for the token's (user, type); idempotent; mandatory types stay on."""
    target = read_token(token)
    if target is None:
        return _invalid()
    outcome = service.turn_off_email(target.user_id, target.type)
    if outcome.status == "unknown":
        return _invalid()
    commit()
    state = "mandatory" if outcome.status == "mandatory" else "done"
    return _in_their_language(target.user_id, state, outcome.type_label, token)
