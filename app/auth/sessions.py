"""Server-side session rules: a session is stamped at sign-in and refused once its user's version moved or it aged out.

The cookie carries uid, sid (random, names this browser's session), ver (the user's session_version at
sign-in) and signed_in_at (unix seconds). Bumping users.session_version (sign out everywhere, a password
or role change) refuses every older cookie at its next request; SESSION_MAX_AGE_HOURS bounds a cookie's
life however active it is. The check needs only the user row the loader reads anyway.
"""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime

from flask import current_app, session

UID = "uid"
SID = "sid"
VER = "ver"
SIGNED_IN_AT = "signed_in_at"
STAMP_KEYS = (UID, SID, VER, SIGNED_IN_AT)
# Web hosts' clocks may differ a little: a stamp slightly in the future is another host's, not a forgery.
CLOCK_SKEW_SECONDS = 300


def stamp(user_id: int, version: int, now: float | None = None) -> dict:
    """Return the session fields of a fresh sign-in (tests build cookies with this too)."""
    return {
        UID: int(user_id),
        SID: secrets.token_urlsafe(16),
        VER: int(version),
        SIGNED_IN_AT: int(time.time() if now is None else now),
    }


def start(user) -> None:
    """Stamp the current session for user, who has just been signed in (after login_user)."""
    session.update(stamp(user.id, user.session_version))


def restamp(version: int) -> None:
    """Keep this session valid after its user's version was bumped to version (sign out everywhere)."""
    session[VER] = int(version)


def current_sid() -> str | None:
    """Return this session's id (None for a session that was never stamped)."""
    sid = session.get(SID)
    return sid if isinstance(sid, str) else None


def current_version() -> int | None:
    """Return the session_version this session was stamped with."""
    ver = session.get(VER)
    return ver if type(ver) is int else None


def max_age_seconds() -> float:
    """Return the absolute lifetime of a session."""
    return float(current_app.config["SESSION_MAX_AGE_HOURS"]) * 3600


def signed_in_at() -> datetime | None:
    """Return when this session signed in."""
    at = session.get(SIGNED_IN_AT)
    return datetime.fromtimestamp(at, UTC) if type(at) is int else None


def expires_at() -> datetime | None:
    """Return when this session ends however active it is."""
    at = session.get(SIGNED_IN_AT)
    return datetime.fromtimestamp(at + max_age_seconds(), UTC) if type(at) is int else None


def is_current(user) -> bool:
    """Return whether this request's session may act as user (stamped for them, same version, not too old).

    A session without stamps (older than this rule, or a remember cookie, which is never issued)
    is refused: its owner signs in once more.
    """
    at = session.get(SIGNED_IN_AT)
    return (
        session.get(UID) == user.id
        and current_sid() is not None
        and current_version() == user.session_version
        and type(at) is int
        and -CLOCK_SKEW_SECONDS <= time.time() - at < max_age_seconds()
    )
