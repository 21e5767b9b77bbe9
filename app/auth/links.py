"""One-time sign-in links: single use, five minutes, bound to one user; only a hash is stored."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

import sqlalchemy as sa

from app.extensions import db
from app.users.queries import by_external_id
from app.users.service import NotAMember, UserNotFound

LIFETIME_SECONDS = 300

CREATE_SQL = sa.text(
    """
INSERT INTO login_links (user_id, token_hash, expires_at)
VALUES (:user_id, :token_hash, now() + make_interval(secs => :lifetime))
RETURNING expires_at
"""
)

VALID_SQL = sa.text(
    "SELECT 1 FROM login_links WHERE token_hash = :token_hash AND used_at IS NULL AND expires_at > now()"
)

# One atomic statement: two clicks racing each other cannot both get a session.
CONSUME_SQL = sa.text(
    """
UPDATE login_links SET used_at = now()
WHERE token_hash = :token_hash AND used_at IS NULL AND expires_at > now()
RETURNING user_id
"""
)


def token_hash(token: str) -> str:
    """Return the SHA-256 hex digest stored for token."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def create_login_link(user_id: int) -> tuple[str, datetime]:
    """Create a link token for user_id; return the token (never stored) and when it expires. Flushes only."""
    token = secrets.token_urlsafe(32)
    params = {"user_id": user_id, "token_hash": token_hash(token), "lifetime": LIFETIME_SECONDS}
    expires_at = db.session.execute(CREATE_SQL, params).scalar_one()
    return token, expires_at


def create_for_member(external_id: str) -> tuple[str, datetime]:
    """Create a link for the member with this external id (never an operator's account); flushes only."""
    row = by_external_id(external_id)
    if row is None:
        raise UserNotFound(external_id)
    if row.role != "member":
        raise NotAMember(external_id)
    return create_login_link(row.id)


def link_is_valid(token: str) -> bool:
    """Return whether token could still be used (unused and not expired); changes nothing."""
    return db.session.execute(VALID_SQL, {"token_hash": token_hash(token)}).first() is not None


def consume_login_link(token: str) -> int | None:
    """Mark the link used and return its user id, or None when it is unknown, used or expired."""
    return db.session.execute(CONSUME_SQL, {"token_hash": token_hash(token)}).scalar()
