"""Reads for sign-in."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.models import User


def user_by_email(email: str) -> User | None:
    """Return the user with this e-mail (case-insensitive), if any."""
    return db.session.scalars(sa.select(User).where(sa.func.lower(User.email) == email.strip().lower())).first()


def user_by_id(user_id: int) -> User | None:
    """Return the user with this id, if any."""
    return db.session.get(User, user_id)
