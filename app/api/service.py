"""Writes behind the API: recipients (upsert, erase), one-time sign-in links, API keys. Flush, never commit.

The API manages members only: operator and admin accounts sign in with a password and can be
neither changed, erased nor given a sign-in link through a product's API key.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from flask import current_app
from sqlalchemy.exc import IntegrityError

from app.api import keys
from app.auth.links import create_login_link
from app.extensions import db

USER_FIELDS = ("email", "display_name", "locale", "timezone")


class UserNotFound(LookupError):
    """No user has this external id."""


class NotAMember(PermissionError):
    """The external id belongs to an operator or admin account."""


class EmailTaken(ValueError):
    """Another user already has this e-mail address."""


def _upsert_sql(changed: list[str]) -> sa.TextClause:
    # Column names come from USER_FIELDS only, never from the request.
    assignments = ", ".join(f"{c} = EXCLUDED.{c}" for c in changed) or "external_id = EXCLUDED.external_id"
    return sa.text(
        f"""
INSERT INTO users (external_id, email, display_name, locale, timezone)
VALUES (:external_id, :email, :display_name, :locale, :timezone)
ON CONFLICT (external_id) DO UPDATE SET {assignments}
WHERE users.role = 'member'
RETURNING external_id, email, display_name, locale, timezone, (xmax = 0) AS created
"""
    )


def upsert_user(external_id: str, changes: dict) -> tuple[dict, bool]:
    """Create the member with this external id or update the fields in changes; return (user, created)."""
    config = current_app.config
    values = {
        "email": None,
        "display_name": "",
        "locale": config["DEFAULT_LOCALE"],
        "timezone": config["DEFAULT_TIMEZONE"],
        **changes,
        "external_id": external_id,
    }
    try:
        with db.session.begin_nested():
            row = db.session.execute(_upsert_sql([c for c in USER_FIELDS if c in changes]), values).first()
    except IntegrityError as exc:
        if getattr(exc.orig.diag, "constraint_name", None) == "users_email_key":
            raise EmailTaken(changes.get("email")) from None
        raise
    if row is None:
        raise NotAMember(external_id)
    user = dict(row._mapping)
    return user, user.pop("created")


# E-mail suppressions are keyed by address, and an address is personal data: erasure removes the
# user's suppression rows too (no hashed copy is kept). If the product re-creates the user with the
# same address, that is a new consent; a new bounce or complaint suppresses it again.
ERASE_SQL = sa.text(
    """
WITH target AS (SELECT id, role, email FROM users WHERE external_id = :external_id),
erased AS (
  DELETE FROM users u USING target t WHERE u.id = t.id AND t.role = 'member' RETURNING u.email
),
forgotten AS (
  DELETE FROM email_suppressions s USING erased e WHERE s.address = lower(e.email)
)
SELECT role FROM target
"""
)


def erase_user(external_id: str) -> None:
    """Delete the member and everything about them (FK cascades: notifications, deliveries, attempts,
    preferences, reads, push subscriptions, sign-in links) and their e-mail suppressions."""
    role = db.session.execute(ERASE_SQL, {"external_id": external_id}).scalar()
    if role is None:
        raise UserNotFound(external_id)
    if role != "member":
        raise NotAMember(external_id)


MEMBER_SQL = sa.text("SELECT id, role FROM users WHERE external_id = :external_id")


def create_login_link_for(external_id: str) -> tuple[str, datetime]:
    """Create a one-time sign-in link for the member; return (token, expires_at)."""
    row = db.session.execute(MEMBER_SQL, {"external_id": external_id}).first()
    if row is None:
        raise UserNotFound(external_id)
    if row.role != "member":
        raise NotAMember(external_id)
    return create_login_link(row.id)


CREATE_KEY_SQL = sa.text(
    """
INSERT INTO api_keys (name, prefix, key_hash, created_by)
VALUES (:name, :prefix, :key_hash, :created_by)
RETURNING id
"""
)


def create_api_key(name: str, created_by: int | None = None) -> tuple[str, str]:
    """Create a key; return (the key, shown once and never stored; its prefix)."""
    for _ in range(3):
        key = keys.generate_key()
        params = {
            "name": name,
            "prefix": keys.key_prefix(key),
            "key_hash": keys.hash_key(key),
            "created_by": created_by,
        }
        try:
            with db.session.begin_nested():
                db.session.execute(CREATE_KEY_SQL, params)
        except IntegrityError:
            continue  # a 48-bit prefix collision: draw another key
        return key, params["prefix"]
    raise RuntimeError("could not draw a unique API key prefix")


REVOKE_KEY_SQL = sa.text(
    "UPDATE api_keys SET revoked_at = now() WHERE prefix = :prefix AND revoked_at IS NULL RETURNING id"
)


def revoke_api_key(prefix: str) -> bool:
    """Revoke the live key with this prefix; return whether one was revoked."""
    keys.forget(prefix)
    return db.session.execute(REVOKE_KEY_SQL, {"prefix": prefix}).first() is not None
