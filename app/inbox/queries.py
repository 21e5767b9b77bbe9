"""Inbox reads: the seed article's statements for the badge, the list and announcements."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from app.announcements.queries import ACTIVE_ANNOUNCEMENT_SQL
from app.extensions import db
from app.pagination import Cursor, Page, time_cursor

PAGE_SIZE = 20
# The badge stops counting here and shows "99+" (seed: count at most cap rows per part).
BADGE_CAP = 100


# Each part is the seed's capped count: the personal one walks only the partial index
# notifications_unread_idx and stops after :cap rows, however many unread rows exist.
BADGE_SQL = sa.text(
    f"""
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM notifications
                         WHERE user_id = :user_id AND read_at IS NULL LIMIT :cap) personal) AS personal,
  (SELECT count(*) FROM (SELECT 1 FROM announcements a
                         WHERE {ACTIVE_ANNOUNCEMENT_SQL}
                           AND NOT EXISTS (SELECT 1 FROM announcement_reads r
                                           WHERE r.announcement_id = a.id AND r.user_id = :user_id)
                         LIMIT :cap) broadcast) AS announcements
"""
)


@dataclass(frozen=True)
class UnreadCounts:
    """The two parts of the badge, each capped at BADGE_CAP."""

    personal: int
    announcements: int

    @property
    def total(self) -> int:
        """What the badge counts."""
        return self.personal + self.announcements


def unread_counts(user_id: int) -> UnreadCounts:
    """Return personal unread and unread active announcements in one statement."""
    row = db.session.execute(BADGE_SQL, {"user_id": user_id, "cap": BADGE_CAP}).one()
    return UnreadCounts(row.personal, row.announcements)


def badge_count(user_id: int) -> int:
    """Return personal unread + unread active announcements, each part capped at BADGE_CAP."""
    return unread_counts(user_id).total


FILTERS = {
    "all": "archived_at IS NULL",
    "unread": "archived_at IS NULL AND read_at IS NULL",
    "archived": "archived_at IS NOT NULL",
}

ROW_COLUMNS = "id, type, title, body, link_path, read_at IS NULL AS unread, read_at, archived_at, created_at"


def _page_sql(filter_name: str, keyset: bool) -> sa.TextClause:
    after = "AND (created_at, id) < (:cursor_created_at, :cursor_id)" if keyset else ""
    return sa.text(
        f"""
SELECT {ROW_COLUMNS}
FROM notifications
WHERE user_id = :user_id AND in_app AND {FILTERS[filter_name]}
  {after}
ORDER BY created_at DESC, id DESC
LIMIT :limit
"""
    )


def notification_page(
    user_id: int, filter_name: str = "all", cursor: str | None = None, limit: int = PAGE_SIZE
) -> Page:
    """Return one keyset page of the user's notifications, newest first."""
    filter_name = filter_name if filter_name in FILTERS else "all"
    position = Cursor.decode(cursor)
    params = {"user_id": user_id, "limit": limit + 1}
    if position:
        params.update(cursor_created_at=position.created_at, cursor_id=position.id)
    rows = db.session.execute(_page_sql(filter_name, position is not None), params).mappings().all()
    return Page.of(rows, limit, time_cursor())


# Hidden (in_app = false) rows are not the user's to see, so they are "not found" like another's.
NOTIFICATION_SQL = sa.text(f"SELECT {ROW_COLUMNS} FROM notifications WHERE id = :id AND user_id = :user_id AND in_app")


def notification_for(user_id: int, notification_id: int):
    """Return one of the user's visible notifications, or None (missing, hidden or someone else's)."""
    return db.session.execute(NOTIFICATION_SQL, {"id": notification_id, "user_id": user_id}).mappings().first()


ANNOUNCEMENT_COLUMNS = "a.id, a.title, a.body, a.body_format, a.published_at, r.read_at IS NULL AS unread"

ANNOUNCEMENTS_SQL = sa.text(
    f"""
SELECT {ANNOUNCEMENT_COLUMNS}
FROM announcements a
LEFT JOIN announcement_reads r ON r.announcement_id = a.id AND r.user_id = :user_id
WHERE {ACTIVE_ANNOUNCEMENT_SQL}
ORDER BY a.published_at DESC
LIMIT :limit
"""
)


def active_announcements(user_id: int, limit: int = 20) -> list:
    """Return the published, unexpired announcements with this user's read state."""
    return list(db.session.execute(ANNOUNCEMENTS_SQL, {"user_id": user_id, "limit": limit}).mappings())


ANNOUNCEMENT_SQL = sa.text(
    f"""
SELECT {ANNOUNCEMENT_COLUMNS}
FROM announcements a
LEFT JOIN announcement_reads r ON r.announcement_id = a.id AND r.user_id = :user_id
WHERE a.id = :id AND {ACTIVE_ANNOUNCEMENT_SQL}
"""
)


def announcement_for(user_id: int, announcement_id: int):
    """Return one active announcement with this user's read state, or None."""
    params = {"id": announcement_id, "user_id": user_id}
    return db.session.execute(ANNOUNCEMENT_SQL, params).mappings().first()
