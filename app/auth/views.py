"""Sign-in and sign-out."""

from __future__ import annotations

from flask import Blueprint, current_app, redirect, render_template, request, session, url_for
from flask_login import current_user, login_required, login_user, logout_user
from flask_wtf import FlaskForm
from werkzeug.security import check_password_hash, generate_password_hash
from wtforms import EmailField, PasswordField
from wtforms.validators import DataRequired, Length

from app.auth import links
from app.extensions import limiter
from app.extensions import login as login_manager
from app.limits import EMAIL_MAX, PASSWORD_MAX
from app.links import same_site_path
from app.unitofwork import commit
from app.users.queries import user_by_email, user_by_id

bp = Blueprint("auth", __name__)

# Compared against when the e-mail is unknown, so both failures take the same time.
_DUMMY_HASH = generate_password_hash("not-a-real-password", method="scrypt")


class LoginForm(FlaskForm):
    """E-mail and password."""

    email = EmailField("E-mail", validators=[DataRequired(), Length(max=EMAIL_MAX)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=PASSWORD_MAX)])


@login_manager.user_loader
def load_user(user_id: str):
    """Return the signed-in user for the session cookie."""
    return user_by_id(int(user_id)) if user_id.isdigit() else None


def safe_next(target: str | None) -> str:
    """Return target only if it is a path on this site (app/links.py); otherwise the inbox."""
    return same_site_path(target) or url_for("inbox.index")


def _account_key() -> str:
    return "login-account:" + request.form.get("email", "").strip().lower()


def _failed(response) -> bool:
    return response.status_code == 401


def _login_limit() -> str:
    return current_app.config["LOGIN_RATE_LIMIT"]


@bp.route("/login", methods=["GET", "POST"])
@limiter.limit(_login_limit, methods=["POST"], deduct_when=_failed, error_message="Too many sign-in attempts.")
@limiter.limit(_login_limit, methods=["POST"], key_func=_account_key, deduct_when=_failed)
def login():
    """Show the sign-in form; on a right password start a fresh session."""
    if current_user.is_authenticated and request.method == "GET":
        return redirect(safe_next(request.args.get("next")))
    form = LoginForm()
    if not form.validate_on_submit():
        status = 401 if request.method == "POST" and not form.errors.get("csrf_token") else 200
        return render_template("auth/login.html", form=form, failed=request.method == "POST"), status
    user = user_by_email(form.email.data)
    if user is None:
        check_password_hash(_DUMMY_HASH, form.password.data)
    if user is None or not user.check_password(form.password.data):
        return render_template("auth/login.html", form=form, failed=True), 401
    session.clear()  # a new session on sign-in (no fixation)
    login_user(user)
    return redirect(safe_next(request.args.get("next")))


@bp.post("/logout")
@login_required
def logout():
    """End the session."""
    logout_user()
    session.clear()
    return redirect(url_for("auth.login"))


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
    session.clear()  # a new session on sign-in (no fixation)
    login_user(user_by_id(user_id))
    return redirect(url_for("inbox.index"))
