"""User reads: by e-mail or id (sign-in), by external id (the API), search for the console."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.models import User
from app.pagination import Page, id_cursor
from app.sqltext import like_prefix

PAGE_SIZE = 50


def search_users(q: str = "", role: str = "", after_id: int = 0, limit: int = PAGE_SIZE) -> Page:
    """Find users by e-mail prefix, exact external id or name fragment; keyset on id."""
    conditions = ["id > :after"]
    params: dict = {"after": after_id, "limit": limit + 1}
    q = q.strip()
    if q:
        conditions.append(
            "(lower(email) LIKE :prefix ESCAPE '\\' OR external_id = :q OR display_name ILIKE :contains ESCAPE '\\')"
        )
        params.update(q=q, prefix=like_prefix(q.lower()), contains="%" + like_prefix(q))
    if role:
        conditions.append("role = :role")
        params["role"] = role
    sql = sa.text(f"""SELECT id, email, external_id, display_name, role, locale, timezone, created_at
FROM users WHERE {" AND ".join(conditions)} ORDER BY id LIMIT :limit""")
    rows = list(db.session.execute(sql, params).mappings())
    return Page.of(rows, limit, id_cursor)


def user_by_email(email: str) -> User | None:
    """Return the user with this e-mail (case-insensitive), if any."""
    return db.session.scalars(sa.select(User).where(sa.func.lower(User.email) == email.strip().lower())).first()


def user_by_id(user_id: int) -> User | None:
    """Return the user with this id, if any."""
    return db.session.get(User, user_id)


MEMBER_SQL = sa.text("SELECT id, role FROM users WHERE external_id = :external_id")


def by_external_id(external_id: str):
    """Return (id, role) of the user with this external id, or None."""
    return db.session.execute(MEMBER_SQL, {"external_id": external_id}).first()


def session_version(user_id: int) -> int | None:
    """Return the user's current session_version, read fresh (None if the user is gone)."""
    return db.session.execute(sa.select(User.session_version).where(User.id == user_id)).scalar()
