"""Writes for accounts: create or update a user with a password and a role."""

from __future__ import annotations

from app.auth.queries import user_by_email
from app.extensions import db
from app.models import ROLES, User


class AccountError(ValueError):
    """A user could not be created or changed; the message says why."""


def create_or_update_user(
    email: str,
    password: str | None,
    *,
    role: str = "member",
    display_name: str = "",
    external_id: str | None = None,
    locale: str = "en",
    timezone: str = "UTC",
) -> User:
    """Create the user with this e-mail, or update the existing one; flush, never commit."""
    if role not in ROLES:
        raise AccountError(f"role must be one of {', '.join(ROLES)}")
    if "@" not in email:
        raise AccountError("that does not look like an e-mail address")
    if password is not None and len(password) < 8:
        raise AccountError("the password must have at least 8 characters")
    user = user_by_email(email)
    if user is None:
        user = User(email=email.strip())
        db.session.add(user)
    user.role = role
    user.locale = locale
    user.timezone = timezone
    if display_name:
        user.display_name = display_name
    if external_id is not None:
        user.external_id = external_id
    if password is not None:
        user.set_password(password)
    db.session.flush()
    return user
