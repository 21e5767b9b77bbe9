"""Announcement reads: what is live now, and the console's active / scheduled / expired sections."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.models import Announcement
from app.pagination import Cursor, Page, time_cursor

# Live: published and not expired. Inbox statements and counts share this condition (alias a).
ACTIVE_ANNOUNCEMENT_SQL = "a.published_at <= now() AND (a.expires_at IS NULL OR a.expires_at > now())"


ANNOUNCEMENT_COLUMNS = """a.id, a.title, a.body, a.body_format, a.published_at, a.expires_at,
       a.created_at, a.updated_at, u.email AS author"""

SECTION_SQL = {
    "active": f"WHERE {ACTIVE_ANNOUNCEMENT_SQL} ORDER BY a.published_at DESC, a.id DESC",
    "scheduled": "WHERE a.published_at > now() ORDER BY a.published_at, a.id",
    "expired": """WHERE a.expires_at <= now() {after}
ORDER BY a.expires_at DESC, a.id DESC""",
}
SECTION_LIMIT = 100
EXPIRED_PAGE = 20


def announcement_section(section: str, cursor: str | None = None) -> Page:
    """Return one section of the announcement list; expired ones page by (expires_at, id)."""
    where = SECTION_SQL[section]
    params: dict = {"limit": SECTION_LIMIT}
    if section == "expired":
        position = Cursor.decode(cursor)
        where = where.format(after="AND (a.expires_at, a.id) < (:c_at, :c_id)" if position else "")
        params = {"limit": EXPIRED_PAGE + 1}
        if position:
            params.update(c_at=position.created_at, c_id=position.id)
    sql = sa.text(
        f"SELECT {ANNOUNCEMENT_COLUMNS} FROM announcements a "
        f"LEFT JOIN users u ON u.id = a.created_by {where} LIMIT :limit"
    )
    rows = list(db.session.execute(sql, params).mappings())
    if section != "expired":
        return Page(rows[:SECTION_LIMIT])
    return Page.of(rows, EXPIRED_PAGE, time_cursor("expires_at"))


def announcement(announcement_id: int) -> Announcement | None:
    """Return the announcement with this id, if any."""
    return db.session.get(Announcement, announcement_id)


COUNTS_SQL = sa.text(
    f"""
SELECT (SELECT count(*) FROM announcements a WHERE {ACTIVE_ANNOUNCEMENT_SQL}) AS active,
       (SELECT count(*) FROM announcements WHERE published_at > now()) AS scheduled,
       (SELECT min(published_at) FROM announcements WHERE published_at > now()) AS next_scheduled_at
"""
)


def counts():
    """How many announcements are live and scheduled, and when the next one goes live."""
    return db.session.execute(COUNTS_SQL).mappings().one()
