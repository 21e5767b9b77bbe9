"""Console writes. Each function validates, changes rows, writes its audit entry and flushes.

Nothing here commits, enqueues or publishes: the view commits once, then publishes the badge event.
Bad input raises ConsoleError with a sentence for the operator before the function's first write,
so a refused change leaves nothing behind (the request's transaction simply ends unused).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import sqlalchemy as sa

from app.api import service as api_service
from app.console import audit, queries
from app.console.markdown import BODY_FORMATS
from app.extensions import db
from app.models import (
    PRIORITIES,
    ROLES,
    Announcement,
    EmailSuppression,
    MessageTemplate,
    NotificationType,
    TemplateVersion,
    User,
)
from app.models.delivery import TEMPLATE_CHANNELS

TYPE_KEY_RE = re.compile(r"^[a-z][a-z0-9_]{1,62}$")
LOCALE_RE = re.compile(r"^[a-z]{2,3}(-[a-z0-9]{2,8}){0,2}$")
TITLE_MAX = 200
BODY_MAX = 20_000
# A "publish at" a little in the past is a slow form, not a mistake; more than this is a mistake.
PAST_GRACE = timedelta(minutes=1)

ANNOUNCEMENT_FIELDS = ("title", "body", "body_format", "published_at", "expires_at")
TYPE_FIELDS = (
    "type",
    "label",
    "description",
    "default_in_app",
    "default_email",
    "default_push",
    "mandatory",
    "priority",
)
TEMPLATE_FIELDS = ("type", "channel", "locale", "subject", "body_text", "body_html")
SUPPRESSION_FIELDS = ("address", "reason", "detail", "created_at")


class ConsoleError(ValueError):
    """The change was refused; the message says why, and nothing was changed."""


class NeedsConfirmation(ConsoleError):
    """Turning a type mandatory overrides users' choices: the operator must confirm first."""

    def __init__(self, overrides: int) -> None:
        super().__init__(f"Making this type mandatory overrides the choices of {overrides} user(s).")
        self.overrides = overrides


def db_now() -> datetime:
    """The database's clock (what the inbox compares published_at against)."""
    return db.session.execute(sa.select(sa.func.now())).scalar_one()


def is_live(announcement: Announcement, now: datetime) -> bool:
    """Whether the announcement shows in inboxes at now."""
    return announcement.published_at <= now and (announcement.expires_at is None or announcement.expires_at > now)


# --- announcements ------------------------------------------------------------------------------


def _check_announcement(
    title: str, body: str, body_format: str, published_at: datetime, expires_at: datetime | None, now: datetime
) -> None:
    if not title.strip() or len(title) > TITLE_MAX:
        raise ConsoleError(f"The title must have 1 to {TITLE_MAX} characters.")
    if not body.strip() or len(body) > BODY_MAX:
        raise ConsoleError(f"The body must have 1 to {BODY_MAX:,} characters.")
    if body_format not in BODY_FORMATS:
        raise ConsoleError("The body format must be plain text or Markdown.")
    if expires_at is not None and expires_at <= published_at:
        raise ConsoleError("The expiry must be after the publication time.")
    if expires_at is not None and expires_at <= now:
        raise ConsoleError("The expiry must be in the future.")


def create_announcement(
    actor,
    *,
    title: str,
    body: str,
    body_format: str = "plain",
    published_at: datetime | None = None,
    expires_at: datetime | None = None,
) -> bool:
    """Create an announcement (published now when no time is given); return whether it is live."""
    now = db_now()
    if published_at is not None and published_at < now - PAST_GRACE:
        raise ConsoleError("That publication time has passed: choose a future time or publish now.")
    published_at = published_at or now
    _check_announcement(title, body, body_format, published_at, expires_at, now)
    item = Announcement(
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
    return is_live(item, now)


def _locked_announcement(announcement_id: int) -> Announcement:
    item = db.session.get(Announcement, announcement_id, with_for_update=True)
    if item is None:
        raise ConsoleError("That announcement no longer exists.")
    return item


def _change_announcement(actor, item: Announcement, action: str, now: datetime, **values) -> bool:
    before = audit.snapshot(item, ANNOUNCEMENT_FIELDS)
    was_live = is_live(item, now)
    for name, value in values.items():
        setattr(item, name, value)
    item.updated_at = now
    db.session.flush()
    audit.record(actor, action, "announcement", item.id, before=before, after=audit.snapshot(item, ANNOUNCEMENT_FIELDS))
    return was_live or is_live(item, now)


def update_announcement(
    actor,
    announcement_id: int,
    *,
    title: str,
    body: str,
    body_format: str,
    published_at: datetime | None,
    expires_at: datetime | None,
) -> bool:
    """Edit an announcement; return whether inboxes see a change (it was or is live)."""
    item = _locked_announcement(announcement_id)
    now = db_now()
    if published_at is None:  # "publish now": keep the original time of one already live
        published_at = item.published_at if item.published_at <= now else now
    elif published_at != item.published_at and published_at < now - PAST_GRACE:
        raise ConsoleError("That publication time has passed: choose a future time or publish now.")
    _check_announcement(title, body, body_format, published_at, expires_at, now)
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
    )


def publish_announcement(actor, announcement_id: int) -> bool:
    """Publish a scheduled announcement now."""
    item = _locked_announcement(announcement_id)
    now = db_now()
    if item.published_at <= now:
        raise ConsoleError("That announcement is already published.")
    return _change_announcement(actor, item, "announcement.publish", now, published_at=now)


def expire_announcement(actor, announcement_id: int) -> bool:
    """End a live announcement now (it leaves every inbox)."""
    item = _locked_announcement(announcement_id)
    now = db_now()
    if not is_live(item, now):
        raise ConsoleError("Only a live announcement can be expired; delete a scheduled one instead.")
    return _change_announcement(actor, item, "announcement.expire", now, expires_at=now)


def delete_announcement(actor, announcement_id: int) -> bool:
    """Delete an announcement and its read marks; return whether it was live."""
    item = _locked_announcement(announcement_id)
    was_live = is_live(item, db_now())
    before = audit.snapshot(item, ANNOUNCEMENT_FIELDS)
    db.session.delete(item)
    db.session.flush()
    audit.record(actor, "announcement.delete", "announcement", announcement_id, before=before)
    return was_live


# --- notification types -------------------------------------------------------------------------


def _check_type(label: str, priority: str) -> None:
    if not label.strip() or len(label) > TITLE_MAX:
        raise ConsoleError(f"The label must have 1 to {TITLE_MAX} characters.")
    if priority not in PRIORITIES:
        raise ConsoleError(f"The priority must be one of {', '.join(PRIORITIES)}.")


def _check_key(key: str) -> None:
    if not TYPE_KEY_RE.match(key):
        raise ConsoleError("The key must be 2–63 characters: a lower-case letter, then letters, digits or _.")
    if queries.notification_type(key) is not None:
        raise ConsoleError(f"A type with the key {key!r} already exists.")


def create_type(
    actor,
    *,
    key: str,
    label: str,
    description: str = "",
    default_in_app: bool = True,
    default_email: bool = False,
    default_push: bool = False,
    mandatory: bool = False,
    priority: str = "default",
) -> NotificationType:
    """Create a notification type (a new key has no preferences, so mandatory needs no confirmation)."""
    _check_key(key)
    _check_type(label, priority)
    item = NotificationType(
        type=key,
        label=label.strip(),
        description=description.strip(),
        default_in_app=default_in_app,
        default_email=default_email,
        default_push=default_push,
        mandatory=mandatory,
        priority=priority,
    )
    db.session.add(item)
    db.session.flush()
    audit.record(actor, "type.create", "notification_type", key, after=audit.snapshot(item, TYPE_FIELDS))
    return item


def _referencing_columns() -> list[tuple[str, str]]:
    """(table, column) pairs whose foreign key points at notification_types, notifications excepted."""
    pairs = []
    for table in db.metadata.sorted_tables:
        for fk in table.foreign_keys:
            if fk.column.table.name == "notification_types" and table.name != "notifications":
                pairs.append((table.name, fk.parent.name))
    return pairs


def _rename_type(old: str, new: str) -> None:
    # The key is the primary key that other rows reference: copy the row, move the references, drop
    # the old row. Callers checked that no notification uses it (those rows are never rewritten).
    columns = ", ".join(TYPE_FIELDS[1:])
    db.session.execute(
        sa.text(
            f"INSERT INTO notification_types (type, {columns}) "
            f"SELECT :new, {columns} FROM notification_types WHERE type = :old"
        ),
        {"new": new, "old": old},
    )
    for table, column in _referencing_columns():
        db.session.execute(
            sa.text(f'UPDATE "{table}" SET "{column}" = :new WHERE "{column}" = :old'), {"new": new, "old": old}
        )
    db.session.execute(sa.text("DELETE FROM notification_types WHERE type = :old"), {"old": old})
    db.session.expire_all()


def update_type(
    actor,
    key: str,
    *,
    new_key: str,
    label: str,
    description: str,
    default_in_app: bool,
    default_email: bool,
    default_push: bool,
    mandatory: bool,
    priority: str,
    confirmed: bool = False,
) -> str:
    """Edit a type (rename only while unused); raise NeedsConfirmation before overriding users' choices."""
    item = db.session.get(NotificationType, key, with_for_update=True)
    if item is None:
        raise ConsoleError("That notification type no longer exists.")
    _check_type(label, priority)
    if new_key != key:
        _check_key(new_key)
        # The row lock above conflicts with the KEY SHARE lock a new notification's foreign key
        # takes, so no notification can start using the key between this check and the rename.
        if queries.type_in_use(key):
            raise ConsoleError("Notifications already use this key, so it can no longer be renamed.")
    if mandatory and not item.mandatory and not confirmed:
        overrides = queries.mandatory_overrides(key, default_in_app, default_email, default_push)
        if overrides:
            raise NeedsConfirmation(overrides)
    before = audit.snapshot(item, TYPE_FIELDS)
    for name, value in dict(
        label=label.strip(),
        description=description.strip(),
        default_in_app=default_in_app,
        default_email=default_email,
        default_push=default_push,
        mandatory=mandatory,
        priority=priority,
    ).items():
        setattr(item, name, value)
    db.session.flush()
    if new_key != key:
        _rename_type(key, new_key)
    after = audit.snapshot(db.session.get(NotificationType, new_key), TYPE_FIELDS)
    audit.record(actor, "type.update", "notification_type", new_key, before=before, after=after)
    return new_key


# --- templates ----------------------------------------------------------------------------------


def normalize_locale(locale: str) -> str:
    """Return the locale as templates store it (lower case, '-' separated) or raise ConsoleError."""
    value = (locale or "").strip().replace("_", "-").lower()
    if not LOCALE_RE.match(value):
        raise ConsoleError("The locale must look like en, pt-br or zh-hant-tw.")
    return value


def check_template_key(type_: str, channel: str, locale: str) -> str:
    """Validate (type, channel, locale) and return the normalized locale."""
    if queries.notification_type(type_) is None:
        raise ConsoleError(f"There is no notification type {type_!r}.")
    if channel not in TEMPLATE_CHANNELS:
        raise ConsoleError(f"The channel must be one of {', '.join(TEMPLATE_CHANNELS)}.")
    return normalize_locale(locale)


def _keep_version(template: MessageTemplate) -> None:
    db.session.add(
        TemplateVersion(
            template_id=template.id,
            subject=template.subject,
            body_text=template.body_text,
            body_html=template.body_html,
            updated_by=template.updated_by,
        )
    )


def save_template(
    actor, type_: str, channel: str, locale: str, *, subject: str, body_text: str, body_html: str, problems: list[str]
) -> MessageTemplate | None:
    """Create or update a template, keeping the previous wording as a version; None if unchanged.

    `problems` are the preview's errors for this wording: a template that cannot render is refused.
    """
    locale = check_template_key(type_, channel, locale)
    if problems:
        raise ConsoleError("The template has errors and was not saved: " + "; ".join(problems))
    if not (subject.strip() or body_text.strip() or body_html.strip()):
        raise ConsoleError("A template needs at least a subject or a body.")
    template = queries.message_template(type_, channel, locale)
    values = dict(subject=subject, body_text=body_text, body_html=body_html if channel == "email" else "")
    if template is None:
        template = MessageTemplate(type=type_, channel=channel, locale=locale)
        db.session.add(template)
        before = None
    else:
        if all(getattr(template, name) == value for name, value in values.items()):
            return None
        before = audit.snapshot(template, TEMPLATE_FIELDS)
        _keep_version(template)
    for name, value in values.items():
        setattr(template, name, value)
    template.updated_by = getattr(actor, "id", None)
    template.updated_at = db_now()
    db.session.flush()
    audit.record(
        actor,
        "template.save",
        "message_template",
        template.id,
        before=before,
        after=audit.snapshot(template, TEMPLATE_FIELDS),
    )
    return template


def restore_template_version(actor, template_id: int, version_id: int) -> MessageTemplate:
    """Make a kept version current again (the current wording is kept as a version first)."""
    template = db.session.get(MessageTemplate, template_id, with_for_update=True)
    version = queries.template_version(template_id, version_id) if template else None
    if version is None:
        raise ConsoleError("That template version no longer exists.")
    before = audit.snapshot(template, TEMPLATE_FIELDS)
    _keep_version(template)
    template.subject, template.body_text, template.body_html = version.subject, version.body_text, version.body_html
    template.updated_by = getattr(actor, "id", None)
    template.updated_at = db_now()
    db.session.flush()
    after = dict(audit.snapshot(template, TEMPLATE_FIELDS), restored_version=version_id)
    audit.record(actor, "template.restore", "message_template", template.id, before=before, after=after)
    return template


# --- suppressions and users ---------------------------------------------------------------------


def lift_suppression(actor, address: str) -> None:
    """Delete a suppression so the address receives e-mail again."""
    item = db.session.get(EmailSuppression, address.strip().lower(), with_for_update=True)
    if item is None:
        raise ConsoleError("That address is not suppressed (any more).")
    before = audit.snapshot(item, SUPPRESSION_FIELDS)
    db.session.delete(item)
    db.session.flush()
    audit.record(actor, "suppression.lift", "email_suppression", before["address"], before=before)


def change_role(actor, user_id: int, role: str) -> User:
    """Change a user's role; the last admin can never be demoted (so someone can always fix things)."""
    if role not in ROLES:
        raise ConsoleError(f"The role must be one of {', '.join(ROLES)}.")
    # Lock every admin row so two admins demoting each other at once cannot both succeed.
    admins = db.session.scalars(sa.select(User.id).where(User.role == "admin").with_for_update()).all()
    target = db.session.get(User, user_id)
    if target is None:
        raise ConsoleError("That user no longer exists.")
    if target.role == role:
        return target
    if target.role == "admin" and len(admins) <= 1:
        raise ConsoleError("This is the last admin: make someone else an admin first.")
    before = {"role": target.role}
    target.role = role
    db.session.flush()
    audit.record(actor, "user.role", "user", target.id, before=before, after={"role": role, "email": target.email})
    return target


# --- API keys (the API module owns key generation and storage; the console adds the audit) ------


def create_api_key(actor, name: str) -> str:
    """Create an API key named name; return the key itself (shown once, never stored)."""
    name = name.strip()
    if not name or len(name) > 100:
        raise ConsoleError("The key's name must have 1 to 100 characters.")
    key, prefix = api_service.create_api_key(name, created_by=getattr(actor, "id", None))
    audit.record(actor, "api_key.create", "api_key", prefix, after={"name": name, "prefix": prefix})
    return key


def revoke_api_key(actor, prefix: str) -> None:
    """Revoke the live key with this prefix: requests using it get 401 from now on."""
    if not api_service.revoke_api_key(prefix):
        raise ConsoleError("That key does not exist or is already revoked.")
    audit.record(actor, "api_key.revoke", "api_key", prefix, before={"revoked": False}, after={"revoked": True})
