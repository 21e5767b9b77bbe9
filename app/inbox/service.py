"""Inbox writes: the seed article's idempotent mark-read statements, plus archive, snooze and mute.

Every statement names user_id, so another user's id changes nothing, and guards on the current
state (read_at IS NULL, archived_at IS NULL, ON CONFLICT DO NOTHING), so running it twice changes
nothing the second time and keeps the first read_at. Functions return how many rows changed; when
something changed they register a badge event for the user's other tabs, which goes out only if the
caller's transaction commits. They never commit.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from flask import current_app
from flask_babel import force_locale, gettext, ngettext

from app.announcements.queries import ACTIVE_ANNOUNCEMENT_SQL
from app.devices import badge as phone_badge
from app.extensions import db
from app.i18n import language_or_default
from app.inbox.queries import TENANT_SEEN_AT_SQL, badge_mode, notification_for
from app.live.publish import badge_after_commit
from app.webhooks import service as webhooks

# Reading a row also cancels its pending escalations at once (e-mail/push waiting to see whether it gets
# read), so the delivery log shows them skipped now rather than when they fall due.
SKIP_ESCALATIONS_CTE = """WITH escalations AS (
  UPDATE notification_deliveries d
  SET status = 'skipped', skip_reason = 'read', locked_until = NULL, updated_at = now()
  FROM notifications n
  WHERE d.notification_id = n.id AND n.user_id = :user_id AND n.read_at IS NULL AND {rows}
    AND d.status = 'pending' AND d.escalation IS NOT NULL)
"""

MARK_READ_SQL = sa.text(
    SKIP_ESCALATIONS_CTE.format(rows="n.id = :id")
    + "UPDATE notifications SET read_at = now() WHERE id = :id AND user_id = :user_id AND read_at IS NULL"
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

READ_ALL_SQL = sa.text(
    SKIP_ESCALATIONS_CTE.format(rows="true")
    + "UPDATE notifications SET read_at = now() WHERE user_id = :user_id AND read_at IS NULL"
)
# A tenant-scoped feed's "read all" (issue 32): only that tenant's rows (and every announcement, addressed to all).
TENANT_READ_ALL_SQL = sa.text(
    SKIP_ESCALATIONS_CTE.format(rows="n.tenant_id = :tenant_id")
    + "UPDATE notifications SET read_at = now() WHERE user_id = :user_id AND read_at IS NULL AND tenant_id = :tenant_id"
)

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
        phone_badge.after_change(params["user_id"])  # the iPhones' app icon count follows, coalesced
    return changed


def mark_read(user_id: int, notification_id: int) -> int:
    """Mark one of the user's notifications read; 0 if it was already read or is not theirs."""
    changed = _run(MARK_READ_SQL, id=notification_id, user_id=user_id)
    if changed:  # the product hears of it in this transaction's outbox (app/webhooks)
        webhooks.emit("notification.read", {"user_id": user_id, "notification_id": notification_id})
    return changed


def archive(user_id: int, notification_id: int) -> int:
    """Archive (and read) one of the user's notifications; 0 if already archived or not theirs."""
    changed = _run(ARCHIVE_SQL, id=notification_id, user_id=user_id)
    if changed:
        webhooks.emit("notification.archived", {"user_id": user_id, "notification_id": notification_id})
    return changed


def unarchive(user_id: int, notification_id: int) -> int:
    """Move an archived notification back to the inbox; it stays read."""
    return _run(UNARCHIVE_SQL, id=notification_id, user_id=user_id)


NOTIFICATION_ACTIONS = {"read": mark_read, "archive": archive, "unarchive": unarchive}


def act_on(user_id: int, notification_id: int, action: str, tenant_id: int | None = None):
    """Read, archive or unarchive one of the user's notifications (the inbox's and the feed's one handler).

    Returns the row as it was before the change, or None (and changes nothing) when it is not the user's (with
    tenant_id, a feed scoped to a tenant: when it is not that tenant's).
    """
    row = notification_for(user_id, notification_id, tenant_id)
    if row is not None:
        NOTIFICATION_ACTIONS[action](user_id, notification_id)
    return row


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


def read_all(user_id: int, tenant_id: int | None = None) -> ReadAll:
    """Mark every personal notification (with tenant_id: that tenant's) and every active announcement read."""
    personal = (_run(READ_ALL_SQL, user_id=user_id) if tenant_id is None
                else _run(TENANT_READ_ALL_SQL, user_id=user_id, tenant_id=tenant_id))  # fmt: skip
    done = ReadAll(personal, _run(READ_ALL_ANNOUNCEMENTS_SQL, user_id=user_id))
    if done.notifications:  # one event for the whole inbox, not one per row
        webhooks.emit("notification.read", {"user_id": user_id, "all": True, "count": done.notifications})
    return done


# --- snooze and mute (issue 15) -------------------------------------------------------------------

# Snoozing reads the row, so it leaves the unread index (and the badge) while it sleeps.
SNOOZE_SQL = sa.text(
    """
UPDATE notifications SET read_at = COALESCE(read_at, now()), snoozed_until = :until
WHERE id = :id AND user_id = :user_id AND in_app AND archived_at IS NULL
"""
)

# Waking puts the row back on top as unread: created_at = now() keeps the list's one order (and its
# index) and makes the row newer than the last-seen time, so it counts as unseen too; the time it
# first arrived is given up for that. An archived row stays read.
WAKE_COLUMNS = """read_at = CASE WHEN n.archived_at IS NULL THEN NULL ELSE n.read_at END,
    snoozed_until = NULL, created_at = now()"""

UNSNOOZE_SQL = sa.text(
    f"""
UPDATE notifications n SET {WAKE_COLUMNS}
WHERE n.id = :id AND n.user_id = :user_id AND n.snoozed_until IS NOT NULL
"""
)

# One statement per batch; SKIP LOCKED lets a second sweeper take other rows instead of waiting, and
# the re-checked WHERE means a row is woken once however many sweepers run.
WAKE_DUE_SQL = sa.text(
    f"""
WITH due AS (
  SELECT id FROM notifications
  WHERE snoozed_until <= now()
  ORDER BY snoozed_until
  LIMIT :limit
  FOR UPDATE SKIP LOCKED
)
UPDATE notifications n SET {WAKE_COLUMNS}
FROM due WHERE n.id = due.id AND n.snoozed_until <= now()
RETURNING n.user_id, n.title, (SELECT u.locale FROM users u WHERE u.id = n.user_id) AS locale
"""
)

MUTE_SQL = sa.text(
    """
INSERT INTO notification_mutes (user_id, group_key)
SELECT n.user_id, n.group_key
FROM notifications n JOIN notification_types t ON t.type = n.type
WHERE n.id = :id AND n.user_id = :user_id AND n.in_app AND n.group_key IS NOT NULL AND NOT t.mandatory
ON CONFLICT DO NOTHING
"""
)


def snooze(user_id: int, notification_id: int, until) -> int:
    """Read and hide one of the user's notifications until `until`; 0 if archived, hidden or not theirs."""
    return _run(SNOOZE_SQL, id=notification_id, user_id=user_id, until=until)


def unsnooze(user_id: int, notification_id: int) -> int:
    """Wake one of the user's snoozed notifications now (on top, unread); 0 if it is not snoozed."""
    return _run(UNSNOOZE_SQL, id=notification_id, user_id=user_id)


def _back_toast(titles: list[str], locale: str | None) -> str:
    """The toast for woken rows, in the user's saved language (the sweeper has no browser to ask)."""
    with force_locale(language_or_default(locale, current_app.config["DEFAULT_LOCALE"])):
        if len(titles) == 1:
            return gettext("Back from snooze: %(title)s", title=titles[0])
        return ngettext("%(num)d snoozed notification is back", "%(num)d snoozed notifications are back", len(titles))


def wake_due(limit: int) -> int:
    """Wake up to `limit` rows whose snooze has ended; each user's tabs get a badge event and a toast."""
    woken: dict[int, list[str]] = {}
    locales: dict[int, str | None] = {}
    for user_id, title, locale in db.session.execute(WAKE_DUE_SQL, {"limit": limit}):
        woken.setdefault(user_id, []).append(title)
        locales[user_id] = locale
    for user_id, titles in woken.items():
        badge_after_commit([user_id], toast_title=_back_toast(titles, locales[user_id]))
    return sum(len(titles) for titles in woken.values())


def mute(user_id: int, notification_id: int) -> int:
    """Mute the thread (group key) of one of the user's notifications; its existing rows stay as they are.

    Mandatory types and rows without a group key are never muted (0); muting twice changes nothing.
    """
    return db.session.execute(MUTE_SQL, {"id": notification_id, "user_id": user_id}).rowcount


# --- seen (issue 15) ------------------------------------------------------------------------------

# The seed's method C upsert: one row per user, never moved back (two tabs opening at once keep the later).
# It also answers whether anything was unseen before, so an unchanged badge publishes nothing.
RECORD_SEEN_SQL = sa.text(
    f"""
WITH previous AS (SELECT seen_at FROM notification_last_seen WHERE user_id = :user_id),
saved AS (
  INSERT INTO notification_last_seen (user_id, seen_at) VALUES (:user_id, now())
  ON CONFLICT (user_id) DO UPDATE SET seen_at = GREATEST(notification_last_seen.seen_at, EXCLUDED.seen_at)
)
SELECT EXISTS (SELECT 1 FROM notifications
               WHERE user_id = :user_id AND read_at IS NULL
                 AND created_at > COALESCE((SELECT seen_at FROM previous), '-infinity'::timestamptz))
    OR EXISTS (SELECT 1 FROM announcements a
               WHERE {ACTIVE_ANNOUNCEMENT_SQL}
                 AND a.published_at > COALESCE((SELECT seen_at FROM previous), '-infinity'::timestamptz)
                 AND NOT EXISTS (SELECT 1 FROM announcement_reads r
                                 WHERE r.announcement_id = a.id AND r.user_id = :user_id))
"""
)


# A tenant-scoped feed's look (issue 32): its own row, never moved back; whether the scope (its tenant's rows and the
# announcements) had anything newer than the later of the member's own last look and the scope's.
RECORD_TENANT_SEEN_SQL = sa.text(
    f"""
WITH previous AS (SELECT {TENANT_SEEN_AT_SQL} AS seen_at),
saved AS (
  INSERT INTO tenant_last_seen (user_id, tenant_id, seen_at) VALUES (:user_id, :tenant_id, now())
  ON CONFLICT (user_id, tenant_id) DO UPDATE SET seen_at = GREATEST(tenant_last_seen.seen_at, EXCLUDED.seen_at)
)
SELECT EXISTS (SELECT 1 FROM notifications
               WHERE user_id = :user_id AND read_at IS NULL AND tenant_id = :tenant_id
                 AND created_at > (SELECT seen_at FROM previous))
    OR EXISTS (SELECT 1 FROM announcements a
               WHERE {ACTIVE_ANNOUNCEMENT_SQL}
                 AND a.published_at > (SELECT seen_at FROM previous)
                 AND NOT EXISTS (SELECT 1 FROM announcement_reads r
                                 WHERE r.announcement_id = a.id AND r.user_id = :user_id))
"""
)


def record_seen(user_id: int, tenant_id: int | None = None) -> bool:
    """Record that the user opened the inbox now; return whether anything was unseen until then.

    With tenant_id (a tenant-scoped feed, issue 32), only that scope is seen: the member's other feeds keep their
    unseen rows. When the badge counts unseen rows and some were, the user's other tabs hear of it (after the
    commit).
    """
    statement = RECORD_SEEN_SQL if tenant_id is None else RECORD_TENANT_SEEN_SQL
    had_unseen = bool(db.session.execute(statement, {"user_id": user_id, "tenant_id": tenant_id}).scalar_one())
    if had_unseen and badge_mode() == "unseen":
        badge_after_commit([user_id])
    if had_unseen:
        webhooks.emit("notification.seen", {"user_id": user_id})
    return had_unseen
