"""User writes: accounts with passwords (CLI, demo), members through the API, roles, session versions; flush only."""

from __future__ import annotations

import json

import sqlalchemy as sa
from flask import current_app
from flask_babel import gettext
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.attributes import set_committed_value

from app.audit import service as audit
from app.extensions import db
from app.live.publish import session_end_after_commit
from app.models import ROLES, User
from app.refusal import Refused
from app.users.queries import user_by_email

BUMP_SQL = sa.text("UPDATE users SET session_version = session_version + 1 WHERE id = :id RETURNING session_version")


def end_sessions(user: User, keep_sid: str | None = None) -> int:
    """Refuse every session of user signed in before now (except keep_sid's sockets); return the new version.

    One atomic UPDATE, so two bumps at once cannot both hand out the same version. After the commit the
    sockets of the ended sessions are closed (4001); a kept session must be re-stamped with the result.
    """
    version = db.session.execute(BUMP_SQL, {"id": user.id}).scalar_one()
    set_committed_value(user, "session_version", version)
    session_end_after_commit(user.id, version, keep_sid)
    return version


def change_role(actor, user_id: int, role: str) -> User:
    """Change a user's role; the last admin can never be demoted (so someone can always fix things)."""
    if role not in ROLES:
        raise Refused(gettext("The role must be one of %(choices)s.", choices=", ".join(ROLES)))
    # Lock every admin row so two admins demoting each other at once cannot both succeed.
    admins = db.session.scalars(sa.select(User.id).where(User.role == "admin").with_for_update()).all()
    target = db.session.get(User, user_id)
    if target is None:
        raise Refused(gettext("That user no longer exists."))
    if target.role == role:
        return target
    if target.role == "admin" and len(admins) <= 1:
        raise Refused(gettext("This is the last admin: make someone else an admin first."))
    before = {"role": target.role}
    target.role = role
    db.session.flush()
    end_sessions(target)  # sessions signed in under the old role must not keep it
    audit.record(actor, "user.role", "user", target.id, before=before, after={"role": role, "email": target.email})
    return target


# --- accounts with a password (CLI, demo data) ---------------------------------------------------


class AccountError(Refused):
    """A user could not be created or changed; the message says why."""


def create_or_update_user(
    email: str,
    password: str | None,
    *,
    role: str = "member",
    display_name: str = "",
    external_id: str | None = None,
    locale: str | None = None,
    timezone: str = "UTC",
) -> User:
    """Create the user with this e-mail, or update the existing one; flush, never commit."""
    if role not in ROLES:
        raise AccountError(gettext("role must be one of %(choices)s", choices=", ".join(ROLES)))
    if "@" not in email:
        raise AccountError(gettext("that does not look like an e-mail address"))
    if password is not None and len(password) < 8:
        raise AccountError(gettext("the password must have at least 8 characters"))
    user = user_by_email(email)
    # A new password or role ends the account's other sessions (a stolen cookie dies with the old password).
    ends_sessions = user is not None and (password is not None or user.role != role)
    if user is None:
        user = User(email=email.strip())
        db.session.add(user)
    user.role = role
    if locale is not None:
        user.locale = locale
    user.timezone = timezone
    if display_name:
        user.display_name = display_name
    if external_id is not None:
        user.external_id = external_id
    if password is not None:
        user.set_password(password)
    db.session.flush()
    if ends_sessions:
        end_sessions(user)
    return user


AUDITED_USER_FIELDS = ("email", "role", "external_id", "display_name")  # never the password hash


def save_account(actor, email: str, password: str | None, **fields) -> User:
    """create_or_update_user, with an audit row saying who created or changed the account."""
    existing = user_by_email(email)
    before = audit.snapshot(existing, AUDITED_USER_FIELDS) if existing else None
    user = create_or_update_user(email, password, **fields)
    audit.record(actor, "user.update" if before else "user.create", "user", user.id, before=before,
                 after=audit.snapshot(user, AUDITED_USER_FIELDS))  # fmt: skip
    return user


# --- members, the product's recipients (the API) -----------------------------------------------

USER_FIELDS = ("email", "display_name", "locale", "timezone", "phone", "sms_opt_in", "properties")

# What a changed field also sets: a number the product's server sends counts as verified by it (kept when it is
# the number already there), and one that changes is no longer refused; a change of consent is stamped 'api'.
FIELD_ASSIGNMENTS = {
    "phone": """phone = EXCLUDED.phone,
      phone_verified_at = CASE WHEN users.phone IS NOT DISTINCT FROM EXCLUDED.phone
                               THEN coalesce(users.phone_verified_at, EXCLUDED.phone_verified_at)
                               ELSE EXCLUDED.phone_verified_at END,
      phone_invalidated_at = CASE WHEN users.phone IS NOT DISTINCT FROM EXCLUDED.phone
                                  THEN users.phone_invalidated_at END,
      phone_invalid_reason = CASE WHEN users.phone IS NOT DISTINCT FROM EXCLUDED.phone
                                  THEN users.phone_invalid_reason END""",
    "sms_opt_in": """sms_opt_in = EXCLUDED.sms_opt_in,
      sms_opt_in_at = CASE WHEN users.sms_opt_in = EXCLUDED.sms_opt_in THEN users.sms_opt_in_at ELSE now() END,
      sms_consent_source = CASE WHEN users.sms_opt_in = EXCLUDED.sms_opt_in THEN users.sms_consent_source
                                ELSE 'api' END""",
}

# The consent in force before this request (locked: two requests for one member record their changes in order).
CONSENT_BEFORE_SQL = sa.text("SELECT sms_opt_in FROM users WHERE external_id = :external_id FOR UPDATE")

CONSENT_SQL = sa.text(
    """
INSERT INTO sms_consents (user_id, phone, opted_in, source, detail)
SELECT id, phone, sms_opt_in, :source, :detail FROM users WHERE external_id = :external_id
"""
)


class UserNotFound(LookupError):
    """No user has this external id."""


class NotAMember(PermissionError):
    """The external id belongs to an operator or admin account."""


class EmailTaken(ValueError):
    """Another user already has this e-mail address."""


def _upsert_sql(changed: list[str]) -> sa.TextClause:
    # Column names come from USER_FIELDS only, never from the request.
    assignments = ", ".join(FIELD_ASSIGNMENTS.get(c, f"{c} = EXCLUDED.{c}") for c in changed)
    return sa.text(
        f"""
INSERT INTO users (external_id, email, display_name, locale, timezone, phone, phone_verified_at, sms_opt_in,
                   sms_opt_in_at, sms_consent_source, properties)
VALUES (:external_id, :email, :display_name, :locale, :timezone, :phone,
        CASE WHEN CAST(:phone AS text) IS NOT NULL THEN now() END, :sms_opt_in,
        CASE WHEN :consent_sent THEN now() END, CASE WHEN :consent_sent THEN 'api' END, CAST(:properties AS jsonb))
ON CONFLICT (external_id) DO UPDATE SET {assignments or "external_id = EXCLUDED.external_id"}
WHERE users.role = 'member'
RETURNING external_id, email, display_name, locale, timezone, phone,
          phone IS NOT NULL AND phone_verified_at IS NOT NULL AND phone_invalidated_at IS NULL AS phone_verified,
          sms_opt_in, properties, (xmax = 0) AS created
"""
    )


def upsert_member(external_id: str, changes: dict) -> tuple[dict, bool]:
    """Create the member with this external id or update the fields in changes; return (user, created).

    A change of SMS consent is also written to sms_consents (source api), as the law asks of consent records.
    """
    config = current_app.config
    values = {
        "email": None,
        "display_name": "",
        "locale": None,
        "timezone": config["DEFAULT_TIMEZONE"],
        "phone": None,
        "sms_opt_in": False,
        **changes,
        "properties": json.dumps(changes.get("properties") or {}, separators=(",", ":")),
        "external_id": external_id,
        "consent_sent": "sms_opt_in" in changes,
    }
    before = None
    if "sms_opt_in" in changes:
        before = db.session.execute(CONSENT_BEFORE_SQL, {"external_id": external_id}).scalar()
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
    if "sms_opt_in" in changes and bool(before) != changes["sms_opt_in"]:  # a new member was not opted in
        db.session.execute(CONSENT_SQL, {"external_id": external_id, "source": "api", "detail": ""})
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


def erase_member(external_id: str) -> None:
    """Delete the member and everything about them (FK cascades: notifications, deliveries, attempts,
    preferences, reads, push subscriptions, sign-in links) and their e-mail suppressions."""
    role = db.session.execute(ERASE_SQL, {"external_id": external_id}).scalar()
    if role is None:
        raise UserNotFound(external_id)
    if role != "member":
        raise NotAMember(external_id)
