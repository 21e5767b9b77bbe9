"""Announcement writes: create, edit, publish now, expire now, delete; each audited.

Each function validates before its first write (a Refused change leaves nothing behind), writes its
audit row and flushes; none commits. When what inboxes show changes, a broadcast badge event is
registered to follow the commit, so every open badge recounts (app/unitofwork.py).
"""

from __future__ import annotations

from datetime import datetime

from flask_babel import format_number, gettext

from app.announcements.markdown import BODY_FORMATS
from app.audit import service as audit
from app.clock import PAST_GRACE, db_now
from app.extensions import db
from app.limits import OPERATOR_BODY_MAX, TITLE_MAX
from app.live.publish import broadcast_after_commit
from app.locales import Variants, clean_variants
from app.models import Announcement
from app.refusal import Refused

ANNOUNCEMENT_FIELDS = ("title", "body", "body_format", "published_at", "expires_at", "locales")


def is_live(announcement: Announcement, now: datetime) -> bool:
    """Whether the announcement shows in inboxes at now."""
    return announcement.published_at <= now and (announcement.expires_at is None or announcement.expires_at > now)


def _inboxes_change(live: bool) -> bool:
    """When what inboxes show changed, every open badge recounts after the commit; return live."""
    if live:
        broadcast_after_commit()
    return live


def _check_announcement(
    title: str, body: str, body_format: str, published_at: datetime, expires_at: datetime | None, now: datetime
) -> None:
    if not title.strip() or len(title) > TITLE_MAX:
        raise Refused(gettext("The title must have 1 to %(max)s characters.", max=TITLE_MAX))
    if not body.strip() or len(body) > OPERATOR_BODY_MAX:
        raise Refused(gettext("The body must have 1 to %(max)s characters.", max=format_number(OPERATOR_BODY_MAX)))
    if body_format not in BODY_FORMATS:
        raise Refused(gettext("The body format must be plain text or Markdown."))
    if expires_at is not None and expires_at <= published_at:
        raise Refused(gettext("The expiry must be after the publication time."))
    if expires_at is not None and expires_at <= now:
        raise Refused(gettext("The expiry must be in the future."))


def _variants(locales: Variants | None) -> dict:
    """The title and body per locale as stored (blanks dropped; the base text is the fallback), or Refused."""
    return clean_variants(
        locales, {"title": (TITLE_MAX, gettext("title")), "body": (OPERATOR_BODY_MAX, gettext("body"))}
    )


def create_announcement(
    actor,
    *,
    title: str,
    body: str,
    body_format: str = "plain",
    published_at: datetime | None = None,
    expires_at: datetime | None = None,
    locales: Variants | None = None,
) -> bool:
    """Create an announcement (published now when no time is given); return whether it is live.

    locales holds the title and body per locale ({"ja": {"title": …, "body": …}}), in body_format too.
    """
    now = db_now()
    if published_at is not None and published_at < now - PAST_GRACE:
        raise Refused(gettext("That publication time has passed: choose a future time or publish now."))
    published_at = published_at or now
    _check_announcement(title, body, body_format, published_at, expires_at, now)
    variants = _variants(locales)
    item = Announcement(
        locales=variants,
        title=title.strip(),
        body=body,
        body_format=body_format,
        published_at=published_at,
        expires_at=expires_at,
        created_by=getattr(actor, "id", None),
    )
    db.session.add(item)
    db.session.flush()
    audit.record(actor, "announcement.create", "announcement", item.id, after=audit.snapshot(item, ANNOUNCEMENT_FIELDS))
    return _inboxes_change(is_live(item, now))


def _locked_announcement(announcement_id: int) -> Announcement:
    item = db.session.get(Announcement, announcement_id, with_for_update=True)
    if item is None:
        raise Refused(gettext("That announcement no longer exists."))
    return item


def _change_announcement(actor, item: Announcement, action: str, now: datetime, **values) -> bool:
    before = audit.snapshot(item, ANNOUNCEMENT_FIELDS)
    was_live = is_live(item, now)
    for name, value in values.items():
        setattr(item, name, value)
    item.updated_at = now
    db.session.flush()
    audit.record(actor, action, "announcement", item.id, before=before, after=audit.snapshot(item, ANNOUNCEMENT_FIELDS))
    return _inboxes_change(was_live or is_live(item, now))


def update_announcement(
    actor,
    announcement_id: int,
    *,
    title: str,
    body: str,
    body_format: str,
    published_at: datetime | None,
    expires_at: datetime | None,
    locales: Variants | None = None,
) -> bool:
    """Edit an announcement; return whether inboxes see a change (it was or is live); locales=None keeps its own."""
    item = _locked_announcement(announcement_id)
    now = db_now()
    if published_at is None:  # "publish now": keep the original time of one already live
        published_at = item.published_at if item.published_at <= now else now
    elif published_at != item.published_at and published_at < now - PAST_GRACE:
        raise Refused(gettext("That publication time has passed: choose a future time or publish now."))
    _check_announcement(title, body, body_format, published_at, expires_at, now)
    variants = {} if locales is None else {"locales": _variants(locales)}
    return _change_announcement(
        actor,
        item,
        "announcement.update",
        now,
        title=title.strip(),
        body=body,
        body_format=body_format,
        published_at=published_at,
        expires_at=expires_at,
        **variants,
    )


def publish_announcement(actor, announcement_id: int) -> bool:
    """Publish a scheduled announcement now."""
    item = _locked_announcement(announcement_id)
    now = db_now()
    if item.published_at <= now:
        raise Refused(gettext("That announcement is already published."))
    return _change_announcement(actor, item, "announcement.publish", now, published_at=now)


def expire_announcement(actor, announcement_id: int) -> bool:
    """End a live announcement now (it leaves every inbox)."""
    item = _locked_announcement(announcement_id)
    now = db_now()
    if not is_live(item, now):
        raise Refused(gettext("Only a live announcement can be expired; delete a scheduled one instead."))
    return _change_announcement(actor, item, "announcement.expire", now, expires_at=now)


def delete_announcement(actor, announcement_id: int) -> bool:
    """Delete an announcement and its read marks; return whether it was live."""
    item = _locked_announcement(announcement_id)
    was_live = is_live(item, db_now())
    before = audit.snapshot(item, ANNOUNCEMENT_FIELDS)
    db.session.delete(item)
    db.session.flush()
    audit.record(actor, "announcement.delete", "announcement", announcement_id, before=before)
    return _inboxes_change(was_live)
