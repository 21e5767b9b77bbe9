"""Inbox reads: the seed article's statements for the badges (unread; unseen, method C), list and announcements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from flask import current_app

from app.actions.queries import ROW_COLUMNS as ACTION_COLUMNS
from app.announcements.queries import ACTIVE_ANNOUNCEMENT_SQL
from app.extensions import db
from app.locales import in_locale
from app.pagination import Cursor, Page, time_cursor
from app.users.queries import by_external_id
from app.users.service import NotAMember, UserNotFound

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


# The seed's method C: the user's last-seen time (-infinity before the first visit). Rows created later
# are unseen; the unread index is (user_id, created_at), so "unread and newer" is an index range.
SEEN_AT_SQL = (
    "COALESCE((SELECT seen_at FROM notification_last_seen WHERE user_id = :user_id), '-infinity'::timestamptz)"
)

# The user's newest :cap unread active announcements, newest first: announcements newer than the last
# visit come first, so "unseen among them" is exactly min(unseen, cap). (A published_at condition in the
# WHERE instead makes the planner guess one row and probe announcement_reads once per announcement.)
NEWEST_UNREAD_ANNOUNCEMENTS = f"""SELECT a.published_at FROM announcements a
            WHERE {ACTIVE_ANNOUNCEMENT_SQL}
              AND NOT EXISTS (SELECT 1 FROM announcement_reads r
                              WHERE r.announcement_id = a.id AND r.user_id = :user_id)
            ORDER BY a.published_at DESC LIMIT :cap"""

# The unseen badge: unread rows newer than the last-seen time (a range of the unread index) and unread
# announcements published after it, each part capped.
UNSEEN_SQL = sa.text(
    f"""
WITH seen AS (SELECT {SEEN_AT_SQL} AS at)
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM notifications
                         WHERE user_id = :user_id AND read_at IS NULL AND created_at > (SELECT at FROM seen)
                         LIMIT :cap) personal) AS personal,
  (SELECT count(*) FILTER (WHERE published_at > (SELECT at FROM seen))
   FROM ({NEWEST_UNREAD_ANNOUNCEMENTS}) newest) AS announcements
"""
)

# Both badges in one round trip (the websocket frame, the counts API). The personal part walks the
# newest :cap unread rows once, newest first, so the unseen ones come first and "unseen among the
# newest cap" is exactly min(unseen, cap): the same caps as BADGE_SQL and UNSEEN_SQL. {scope} narrows the rows to
# one tenant's (issue 32: a scoped feed), read from notifications_tenant_unread_idx (user_id, tenant_id, created_at)
# WHERE read_at IS NULL AND tenant_id IS NOT NULL; announcements, addressed to everyone, count for every scope.
# A scope's unseen rows are the ones newer than the later of the member's own last look and their last look at that
# scope (tenant_last_seen): opening Hato's inbox sees everything, opening one tenant's bell sees only its part.
TENANT_SCOPE_SQL = " AND tenant_id = :tenant_id"
TENANT_SEEN_AT_SQL = f"""GREATEST({SEEN_AT_SQL}, COALESCE((SELECT seen_at FROM tenant_last_seen
                                     WHERE user_id = :user_id AND tenant_id = :tenant_id), '-infinity'::timestamptz))"""
_COUNTS_SQL = """
WITH seen AS (SELECT {seen} AS at)
SELECT p.unread AS personal, p.unseen AS personal_unseen, b.unread AS announcements, b.unseen AS announcements_unseen
FROM (SELECT count(*) AS unread, count(*) FILTER (WHERE created_at > (SELECT at FROM seen)) AS unseen
      FROM (SELECT created_at FROM notifications
            WHERE user_id = :user_id AND read_at IS NULL{scope}
            ORDER BY created_at DESC LIMIT :cap) newest) p,
     (SELECT count(*) AS unread, count(*) FILTER (WHERE published_at > (SELECT at FROM seen)) AS unseen
      FROM ({announcements}) newest) b
"""
COUNTS_SQL = sa.text(_COUNTS_SQL.format(seen=SEEN_AT_SQL, scope="", announcements=NEWEST_UNREAD_ANNOUNCEMENTS))
TENANT_COUNTS_SQL = sa.text(
    _COUNTS_SQL.format(seen=TENANT_SEEN_AT_SQL, scope=TENANT_SCOPE_SQL, announcements=NEWEST_UNREAD_ANNOUNCEMENTS)
)

BADGE_MODES = ("unread", "unseen")


@dataclass(frozen=True)
class BadgeCounts:
    """Both badges of one user: unread, and unseen (unread and newer than the last visit), each capped."""

    unread: int
    unseen: int

    def shown(self, mode: str | None = None) -> int:
        """The one the badge shows under BADGE_COUNTS (mode; default: the app's setting)."""
        return self.unseen if (mode or badge_mode()) == "unseen" else self.unread


def badge_mode() -> str:
    """What the badge counts: BADGE_COUNTS, unread (the seed's table) or unseen."""
    return current_app.config["BADGE_COUNTS"]


def unseen_count(user_id: int) -> int:
    """Return unread rows + unread active announcements newer than the user's last visit, each part capped."""
    row = db.session.execute(UNSEEN_SQL, {"user_id": user_id, "cap": BADGE_CAP}).one()
    return row.personal + row.announcements


def badge_counts(user_id: int, tenant_id: int | None = None) -> BadgeCounts:
    """Return both badges in one statement; with tenant_id, of that tenant's notifications (and announcements)."""
    statement = COUNTS_SQL if tenant_id is None else TENANT_COUNTS_SQL
    row = db.session.execute(statement, {"user_id": user_id, "cap": BADGE_CAP, "tenant_id": tenant_id}).one()
    return BadgeCounts(row.personal + row.announcements, row.personal_unseen + row.announcements_unseen)


def member_badge_counts(external_id: str) -> BadgeCounts:
    """Both badges of the member with this external id (UserNotFound; NotAMember for an operator's)."""
    row = by_external_id(external_id)
    if row is None:
        raise UserNotFound(external_id)
    if row.role != "member":
        raise NotAMember(external_id)
    return badge_counts(row.id)


def badge_count(user_id: int) -> int:
    """Return what the badge shows: unread (personal + announcements) or, under BADGE_COUNTS=unseen, unseen."""
    if badge_mode() == "unseen":
        return unseen_count(user_id)
    return unread_counts(user_id).total


# A snoozed row is hidden from every list but "snoozed" until the sweeper wakes it.
FILTERS = {
    "all": "archived_at IS NULL AND snoozed_until IS NULL",
    "unread": "archived_at IS NULL AND read_at IS NULL AND snoozed_until IS NULL",
    "archived": "archived_at IS NOT NULL AND snoozed_until IS NULL",
    "snoozed": "snoozed_until IS NOT NULL",
}

# mutable / muted are looked up per returned row (a primary-key probe each), so the list's plan stays
# a walk of notifications_list_idx.
ROW_COLUMNS = """id, type, title, body, link_path, read_at IS NULL AS unread, read_at, archived_at, created_at,
  snoozed_until, group_key,
  group_key IS NOT NULL AND NOT (SELECT t.mandatory FROM notification_types t WHERE t.type = notifications.type)
    AS mutable,
  group_key IS NOT NULL AND EXISTS (SELECT 1 FROM notification_mutes m
                                    WHERE m.user_id = notifications.user_id AND m.group_key = notifications.group_key)
    AS muted,
  CASE WHEN topic_id IS NOT NULL THEN (
    SELECT ARRAY[t.key, t.name] FROM topics t
    JOIN topic_subscriptions s ON s.topic_id = t.id AND s.user_id = notifications.user_id
    WHERE t.id = notifications.topic_id) END AS followed_topic"""
# followed_topic: [key, name] of the topic the row came from while the user still follows it (the row's Unfollow).
# seen: created before the user's last visit; the others get the "new" marker (an InitPlan, read once).
ROW_COLUMNS += f",\n  created_at <= {SEEN_AT_SQL} AS seen"
# The row's action buttons (issue 33): their states and the member's locale are read only for a row with some.
ROW_COLUMNS += f",\n  {ACTION_COLUMNS}"


def _page_sql(filter_name: str, keyset: bool, scoped: bool = False) -> sa.TextClause:
    after = "AND (created_at, id) < (:cursor_created_at, :cursor_id)" if keyset else ""
    # A tenant's page walks notifications_tenant_list_idx (user_id, tenant_id, created_at DESC, id DESC).
    scope = TENANT_SCOPE_SQL if scoped else ""
    return sa.text(
        f"""
SELECT {ROW_COLUMNS}
FROM notifications
WHERE user_id = :user_id{scope} AND in_app AND {FILTERS[filter_name]}
  {after}
ORDER BY created_at DESC, id DESC
LIMIT :limit
"""
    )


def notification_page(
    user_id: int,
    filter_name: str = "all",
    cursor: str | None = None,
    limit: int = PAGE_SIZE,
    tenant_id: int | None = None,
) -> Page:
    """Return one keyset page of the user's notifications, newest first (with tenant_id: that tenant's only)."""
    filter_name = filter_name if filter_name in FILTERS else "all"
    position = Cursor.decode(cursor)
    params = {"user_id": user_id, "limit": limit + 1, "tenant_id": tenant_id}
    if position:
        params.update(cursor_created_at=position.created_at, cursor_id=position.id)
    statement = _page_sql(filter_name, position is not None, tenant_id is not None)
    rows = db.session.execute(statement, params).mappings().all()
    return Page.of(rows, limit, time_cursor())


# Hidden (in_app = false) rows are not the user's to see, so they are "not found" like another's.
NOTIFICATION_SQL = sa.text(f"SELECT {ROW_COLUMNS} FROM notifications WHERE id = :id AND user_id = :user_id AND in_app")
TENANT_NOTIFICATION_SQL = sa.text(
    f"SELECT {ROW_COLUMNS} FROM notifications WHERE id = :id AND user_id = :user_id AND in_app{TENANT_SCOPE_SQL}"
)


def notification_for(user_id: int, notification_id: int, tenant_id: int | None = None):
    """Return one of the user's visible notifications, or None (missing, hidden, someone else's, or with tenant_id
    another tenant's or none's)."""
    statement = NOTIFICATION_SQL if tenant_id is None else TENANT_NOTIFICATION_SQL
    params = {"id": notification_id, "user_id": user_id, "tenant_id": tenant_id}
    return db.session.execute(statement, params).mappings().first()


ANNOUNCEMENT_COLUMNS = (
    "a.id, a.title, a.body, a.body_format, a.locales, a.published_at, r.read_at IS NULL AS unread, "
    f"a.published_at <= {SEEN_AT_SQL} AS seen"
)

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


ANNOUNCEMENT_TEXT = ("title", "body")  # what an announcement has per locale (its `locales` column)


def active_announcements(user_id: int, limit: int = 20, chain: Sequence[str] = ()) -> list[dict]:
    """Return the published, unexpired announcements with this user's read state, newest first.

    Title and body are in the first locale along chain (app/locales.locale_chain) that has them, else the base text.
    """
    rows = db.session.execute(ANNOUNCEMENTS_SQL, {"user_id": user_id, "limit": limit}).mappings()
    return [in_locale(row, ANNOUNCEMENT_TEXT, chain) for row in rows]


ANNOUNCEMENT_SQL = sa.text(
    f"""
SELECT {ANNOUNCEMENT_COLUMNS}
FROM announcements a
LEFT JOIN announcement_reads r ON r.announcement_id = a.id AND r.user_id = :user_id
WHERE a.id = :id AND {ACTIVE_ANNOUNCEMENT_SQL}
"""
)


def announcement_for(user_id: int, announcement_id: int, chain: Sequence[str] = ()) -> dict | None:
    """Return one active announcement with this user's read state (its words along chain), or None."""
    params = {"id": announcement_id, "user_id": user_id}
    row = db.session.execute(ANNOUNCEMENT_SQL, params).mappings().first()
    return None if row is None else in_locale(row, ANNOUNCEMENT_TEXT, chain)
