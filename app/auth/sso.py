"""Accounts of people who sign in through OpenID Connect: found by (issuer, subject), created on first sign-in,
their role set from the provider's claims at every sign-in. Flushes only; the view commits.

A first sign-in whose e-mail is already a Hato account's is linked to it only when the provider says it verified
the address (email_verified); otherwise anyone able to set that e-mail at the provider could take the account over.
"""

from __future__ import annotations

from types import SimpleNamespace

import sqlalchemy as sa

from app.audit import service as audit
from app.extensions import db
from app.models import User
from app.users.queries import user_by_email
from app.users.service import end_sessions

FIND_SQL = sa.text(
    """
UPDATE oidc_accounts SET last_sign_in_at = now()
WHERE issuer = :issuer AND subject = :subject
RETURNING user_id
"""
)
# Two first sign-ins racing each other: the second finds the first's link instead of failing on the key.
LINK_SQL = sa.text(
    """
INSERT INTO oidc_accounts (issuer, subject, user_id) VALUES (:issuer, :subject, :user_id)
ON CONFLICT (issuer, subject) DO UPDATE SET last_sign_in_at = now()
RETURNING user_id
"""
)


# Who the audit log names for a role the provider gave.
PROVIDER_ACTOR = SimpleNamespace(audit_label="OpenID Connect sign-in")


class AccountRefused(Exception):
    """No account can be signed in for these claims; the message is for the log."""


def _display_name(claims: dict) -> str:
    for key in ("name", "preferred_username", "email"):
        value = claims.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:200]
    return ""


def _new_or_linked_user(claims: dict) -> User:
    email = claims.get("email") if isinstance(claims.get("email"), str) else None
    existing = user_by_email(email) if email else None
    if existing is not None:
        if claims.get("email_verified") is not True:
            raise AccountRefused(f"{email} is already an account here and the provider has not verified it")
        return existing
    user = User(email=email, display_name=_display_name(claims))
    db.session.add(user)
    db.session.flush()
    return user


def account_for(issuer: str, claims: dict, role: str) -> tuple[User, bool]:
    """Return the user these claims sign in as (created just in time) and whether it was created; set its role."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise AccountRefused("the ID token has no subject")
    ids = {"issuer": issuer, "subject": subject}
    user_id = db.session.execute(FIND_SQL, ids).scalar()
    created = user_id is None
    if created:
        user = _new_or_linked_user(claims)
        user_id = db.session.execute(LINK_SQL, {**ids, "user_id": user.id}).scalar_one()
    user = db.session.get(User, user_id)
    set_role(user, role)
    return user, created


def set_role(user: User, role: str) -> None:
    """Give user the provider's role; a change ends the user's other sessions (they held the old role)."""
    if user.role == role:
        return
    before = {"role": user.role}
    user.role = role
    db.session.flush()
    end_sessions(user)
    audit.record(
        PROVIDER_ACTOR, "user.role.sso", "user", user.id, before=before, after={"role": role, "email": user.email}
    )
