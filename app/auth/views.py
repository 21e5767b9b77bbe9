"""Sign-in and sign-out."""

from __future__ import annotations

import logging

from flask import Blueprint, current_app, flash, redirect, render_template, request, session, url_for
from flask_babel import gettext, lazy_gettext
from flask_login import current_user, login_required, login_user, logout_user
from flask_wtf import FlaskForm
from werkzeug.security import check_password_hash, generate_password_hash
from wtforms import EmailField, PasswordField
from wtforms.validators import DataRequired, Length

from app.auth import links, oidc, sessions, sso, throttle
from app.extensions import limiter
from app.extensions import login as login_manager
from app.limits import EMAIL_MAX, PASSWORD_MAX
from app.links import same_site_path
from app.live.publish import publish_session_end
from app.unitofwork import commit
from app.users.queries import user_by_email, user_by_id
from app.users.service import end_sessions

bp = Blueprint("auth", __name__)
log = logging.getLogger(__name__)
# The session keys of an OpenID Connect sign-in: where to go after it, and the ID token for sign-out.
OIDC_NEXT = "oidc_next"
OIDC_ID_TOKEN = "oidc_id_token"  # noqa: S105 - a session key, not a secret

# Checked against when there is no stored hash (unknown e-mail, no password set): every failure costs one scrypt.
_DUMMY_HASH = generate_password_hash("not-a-real-password", method="scrypt")


class LoginForm(FlaskForm):
    """E-mail and password."""

    email = EmailField(lazy_gettext("E-mail"), validators=[DataRequired(), Length(max=EMAIL_MAX)])
    password = PasswordField(lazy_gettext("Password"), validators=[DataRequired(), Length(max=PASSWORD_MAX)])


@login_manager.user_loader
def load_user(user_id: str):
    """Return the signed-in user for the session cookie, unless the session was ended or is too old."""
    user = user_by_id(int(user_id)) if user_id.isdigit() else None
    return user if user is not None and sessions.is_current(user) else None


def safe_next(target: str | None) -> str:
    """Return target only if it is a path on this site (app/links.py); otherwise the inbox."""
    return same_site_path(target) or url_for("inbox.index")


def _login_page(form, status: int = 200, **context):
    return render_template("auth/login.html", form=form, oidc_name=_oidc_name(), **context), status


def _oidc_name() -> str | None:
    """The provider's display name when OpenID Connect sign-in is set up."""
    return current_app.config["OIDC_DISPLAY_NAME"] if oidc.configured() else None


def _staff_only_through_oidc(user) -> bool:
    return oidc.configured() and current_app.config["OIDC_ONLY_STAFF"] and user.is_operator


def _refused(form):
    throttle.note_failure()
    return _login_page(form, 401, failed=True)


def _signed_in(user):
    """Start a fresh session for user (no fixation)."""
    session.clear()
    login_user(user)
    sessions.start(user)


# Failed attempts only (app/auth/throttle.py): per (account, address), per address, and a per-account ceiling.
@bp.route("/login", methods=["GET", "POST"])
@limiter.limit(
    throttle.account_client_limit,
    methods=["POST"],
    key_func=throttle.account_client_key,
    deduct_when=throttle.failed,
    error_message=throttle.TOO_MANY,
)
@limiter.limit(
    throttle.client_limit,
    methods=["POST"],
    key_func=throttle.client_key,
    deduct_when=throttle.failed,
    error_message=throttle.TOO_MANY,
)
def login():
    """Show the sign-in form; on a right password start a fresh session."""
    if current_user.is_authenticated and request.method == "GET":
        return redirect(safe_next(request.args.get("next")))
    if request.method == "POST":
        throttle.check_account_ceiling()
    form = LoginForm()
    if not form.validate_on_submit():
        if request.method == "POST" and not form.errors.get("csrf_token"):
            return _refused(form)
        return _login_page(form, failed=request.method == "POST")
    user = user_by_email(form.email.data)
    # One scrypt check whoever it is (stranger, member without a password, member with one): same time.
    stored = user.password_hash if user is not None else None
    matches = check_password_hash(stored or _DUMMY_HASH, form.password.data)
    if not (matches and stored):
        return _refused(form)
    if _staff_only_through_oidc(user):  # told only after the right password: a guesser learns nothing new
        return _login_page(form, 403, staff_refused=True)
    _signed_in(user)
    return redirect(safe_next(request.args.get("next")))


@bp.get("/login/oidc")
def login_oidc():
    """Send the browser to the provider's sign-in page (state, nonce and PKCE verifier kept in the session)."""
    if not oidc.configured():
        return redirect(url_for("auth.login"))
    session[OIDC_NEXT] = same_site_path(request.args.get("next"))
    try:
        return oidc.start(current_app.config["BASE_URL"] + url_for("auth.oidc_callback"))
    except oidc.SignInRefused as exc:
        log.warning("OIDC sign-in could not start: %s", exc)
        return _login_page(LoginForm(), 502, oidc_failed=True)


@bp.get("/login/oidc/callback")
def oidc_callback():
    """Check the provider's answer; sign in the account linked to it (created on first sign-in), role refreshed."""
    if not oidc.configured():
        return redirect(url_for("auth.login"))
    target = session.pop(OIDC_NEXT, None)
    try:
        claims, id_token = oidc.finish()
        user, created = sso.account_for(oidc.issuer(), claims, oidc.role_from(claims))
    except (oidc.SignInRefused, sso.AccountRefused) as exc:
        log.warning("OIDC sign-in refused: %s", exc)
        return _login_page(LoginForm(), 401, oidc_failed=True)
    commit()
    if created:
        log.info("OIDC sign-in created user %s (%s)", user.id, user.role)
    _signed_in(user)
    session[OIDC_ID_TOKEN] = id_token  # the id_token_hint of the provider's sign-out
    default = url_for("console.index") if user.is_operator else None
    return redirect(same_site_path(target) or default or url_for("inbox.index"))


@bp.post("/logout")
@login_required
def logout():
    """End the session and close its sockets (4001); after an OIDC sign-in, end the provider's session too."""
    user_id, sid, id_token = current_user.id, sessions.current_sid(), session.get(OIDC_ID_TOKEN)
    logout_user()
    session.clear()
    if sid is not None:
        publish_session_end(user_id, sid=sid)
    back = current_app.config["BASE_URL"] + url_for("auth.login")
    provider = oidc.logout_url(id_token, back) if id_token and oidc.configured() else None
    return redirect(provider or url_for("auth.login"))


@bp.get("/account/sign-ins")
@login_required
def sign_ins():
    """This session's sign-in time and lifetime, and the button that ends every other session."""
    return render_template("auth/sign_ins.html", signed_in_at=sessions.signed_in_at(), expires_at=sessions.expires_at())


@bp.post("/logout/everywhere")
@login_required
def logout_everywhere():
    """End every other session of this user (their next request is refused, their sockets close); keep this one."""
    version = end_sessions(current_user, keep_sid=sessions.current_sid())
    commit()
    sessions.restamp(version)
    flash(gettext("Every other session is signed out. This browser stays signed in."), "success")
    return redirect(url_for("auth.sign_ins"))


@bp.route("/login/link/<token>", methods=["GET", "POST"])
def login_link(token: str):
    """GET shows a button (link scanners only GET, so they cannot use the link up); POST signs in once."""
    if request.method == "GET":
        if not links.link_is_valid(token):
            return render_template("auth/login_link_invalid.html"), 410
        return render_template("auth/login_link.html", token=token)
    user_id = links.consume_login_link(token)
    if user_id is None:
        return render_template("auth/login_link_invalid.html"), 410
    commit()
    _signed_in(user_by_id(user_id))
    return redirect(url_for("inbox.index"))
