"""Inbox writes: the seed article's idempotent mark-read statements, plus archive.

Every statement names user_id, so another user's id changes nothing, and guards on the current
state (read_at IS NULL, archived_at IS NULL, ON CONFLICT DO NOTHING), so running it twice changes
nothing the second time and keeps the first read_at. Functions return how many rows changed; when
something changed they register a badge event for the user's other tabs, which goes out only if the
caller's transaction commits. They never commit.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from app.announcements.queries import ACTIVE_ANNOUNCEMENT_SQL
from app.extensions import db
from app.live.publish import badge_after_commit

MARK_READ_SQL = sa.text(
    "UPDATE notifications SET read_at = now() WHERE id = :id AND user_id = :user_id AND read_at IS NULL"
)

# Archiving reads the row too: an archived row never keeps the badge up.
ARCHIVE_SQL = sa.text(
    """
UPDATE notifications SET archived_at = now(), read_at = COALESCE(read_at, now())
WHERE id = :id AND user_id = :user_id AND archived_at IS NULL
"""
)

UNARCHIVE_SQL = sa.text(
    "UPDATE notifications SET archived_at = NULL WHERE id = :id AND user_id = :user_id AND archived_at IS NOT NULL"
)

READ_ALL_SQL = sa.text("UPDATE notifications SET read_at = now() WHERE user_id = :user_id AND read_at IS NULL")

# The SELECT form of the seed's single insert: an expired or unpublished id inserts nothing.
READ_ANNOUNCEMENT_SQL = sa.text(
    f"""
INSERT INTO announcement_reads (user_id, announcement_id)
SELECT :user_id, a.id FROM announcements a
WHERE a.id = :id AND {ACTIVE_ANNOUNCEMENT_SQL}
ON CONFLICT DO NOTHING
"""
)

READ_ALL_ANNOUNCEMENTS_SQL = sa.text(
    f"""
INSERT INTO announcement_reads (user_id, announcement_id)
SELECT :user_id, a.id
FROM announcements a
WHERE {ACTIVE_ANNOUNCEMENT_SQL}
ON CONFLICT DO NOTHING
"""
)


def _run(statement: sa.TextClause, **params) -> int:
    changed = db.session.execute(statement, params).rowcount
    if changed:
        badge_after_commit([params["user_id"]])
    return changed


def mark_read(user_id: int, notification_id: int) -> int:
    """Mark one of the user's notifications read; 0 if it was already read or is not theirs."""
    return _run(MARK_READ_SQL, id=notification_id, user_id=user_id)


def archive(user_id: int, notification_id: int) -> int:
    """Archive (and read) one of the user's notifications; 0 if already archived or not theirs."""
    return _run(ARCHIVE_SQL, id=notification_id, user_id=user_id)


def unarchive(user_id: int, notification_id: int) -> int:
    """Move an archived notification back to the inbox; it stays read."""
    return _run(UNARCHIVE_SQL, id=notification_id, user_id=user_id)


def read_announcement(user_id: int, announcement_id: int) -> int:
    """Record that the user read an active announcement; 0 if already read or not active."""
    return _run(READ_ANNOUNCEMENT_SQL, id=announcement_id, user_id=user_id)


@dataclass(frozen=True)
class ReadAll:
    """How many personal rows and announcements one read-all changed."""

    notifications: int
    announcements: int

    @property
    def changed(self) -> bool:
        """Whether anything became read."""
        return bool(self.notifications or self.announcements)


def read_all(user_id: int) -> ReadAll:
    """Mark every personal notification and every active announcement read (the seed's two statements)."""
    return ReadAll(_run(READ_ALL_SQL, user_id=user_id), _run(READ_ALL_ANNOUNCEMENTS_SQL, user_id=user_id))
