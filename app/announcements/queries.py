"""Announcement reads: what is live now, and the console's active / scheduled / expired sections."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.models import Announcement
from app.pagination import Cursor, Page, time_cursor
from app.sqltext import like_prefix

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
SECTIONS = ("active", "scheduled", "expired")
BODY_FORMATS = ("plain", "markdown")
# The console's search: title or body containing the words (wildcards escaped), and the body format.
SEARCH_SQL = (
    "(a.title ILIKE :contains ESCAPE '\\' OR a.body ILIKE :contains ESCAPE '\\'"
    " OR CAST(a.locales AS text) ILIKE :contains ESCAPE '\\')"  # the variants' words too
)


def announcement_section(section: str, cursor: str | None = None, q: str = "", body_format: str = "") -> Page:
    """Return one section of the announcement list; expired ones page by (expires_at, id).

    q narrows to titles or bodies containing it (case-insensitive, its % and _ taken literally);
    body_format to plain or markdown ones.
    """
    where = SECTION_SQL[section]
    params: dict = {"limit": SECTION_LIMIT}
    narrow = []
    if q.strip():
        narrow.append(SEARCH_SQL)
        params["contains"] = "%" + like_prefix(q.strip())
    if body_format:
        narrow.append("a.body_format = :body_format")
        params["body_format"] = body_format
    if section == "expired":
        position = Cursor.decode(cursor)
        after = ["(a.expires_at, a.id) < (:c_at, :c_id)"] if position else []
        where = where.format(after="".join(f"AND {c} " for c in [*after, *narrow]))
        params["limit"] = EXPIRED_PAGE + 1
        if position:
            params.update(c_at=position.created_at, c_id=position.id)
    elif narrow:
        where = where.replace("WHERE ", "WHERE " + " AND ".join(narrow) + " AND ", 1)
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
