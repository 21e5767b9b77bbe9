"""Console reads: announcements by state, types, templates, suppressions, users, the audit log.

Every list that can grow without bound is keyset-paginated (no skipped-row scans); the rest are small
tables (types, templates, live announcements) read whole with a LIMIT as a guard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from app.extensions import db
from app.inbox.queries import ACTIVE_ANNOUNCEMENT_SQL, Cursor
from app.models import Announcement, MessageTemplate, NotificationType, TemplateVersion, User


@dataclass(frozen=True)
class Page:
    """One page of rows and the opaque cursor of the next page (None on the last page)."""

    rows: list
    next_cursor: str | None = None


def like_prefix(text: str) -> str:
    """Return text as a LIKE prefix pattern with its wildcards escaped (ESCAPE '\\')."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


# --- dashboard ----------------------------------------------------------------------------------

SUPPRESSION_COUNT_CAP = 10_000

SUMMARY_SQL = sa.text(
    f"""
SELECT (SELECT count(*) FROM announcements a WHERE {ACTIVE_ANNOUNCEMENT_SQL}) AS active_announcements,
       (SELECT count(*) FROM announcements WHERE published_at > now()) AS scheduled_announcements,
       (SELECT min(published_at) FROM announcements WHERE published_at > now()) AS next_scheduled_at,
       (SELECT count(*) FROM notification_types) AS types,
       (SELECT count(*) FROM message_templates) AS templates,
       (SELECT count(*) FROM (SELECT 1 FROM email_suppressions LIMIT :cap) s) AS suppressions,
       (SELECT count(*) FROM api_keys WHERE revoked_at IS NULL) AS api_keys
"""
)


def dashboard_summary():
    """Return the console's headline counts in one statement (suppressions capped at 10,000)."""
    return db.session.execute(SUMMARY_SQL, {"cap": SUPPRESSION_COUNT_CAP + 1}).mappings().one()


# --- announcements ------------------------------------------------------------------------------

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
    if section != "expired" or len(rows) <= EXPIRED_PAGE:
        return Page(rows[:SECTION_LIMIT])
    rows = rows[:EXPIRED_PAGE]
    return Page(rows, Cursor(rows[-1]["expires_at"], rows[-1]["id"]).encode())


def announcement(announcement_id: int) -> Announcement | None:
    """Return the announcement with this id, if any."""
    return db.session.get(Announcement, announcement_id)


# --- notification types -------------------------------------------------------------------------

TYPES_SQL = sa.text(
    """
SELECT t.type, t.label, t.description, t.default_in_app, t.default_email, t.default_push,
       t.mandatory, t.priority,
       (SELECT count(*) FROM message_templates m WHERE m.type = t.type) AS templates
FROM notification_types t
ORDER BY t.type
"""
)


def notification_types() -> list:
    """Return every type with its defaults and how many templates it has."""
    return list(db.session.execute(TYPES_SQL).mappings())


def notification_type(key: str) -> NotificationType | None:
    """Return the type with this key, if any."""
    return db.session.get(NotificationType, key)


def type_in_use(key: str) -> bool:
    """Whether any notification was ever recorded with this type (then its key is frozen)."""
    return db.session.execute(
        sa.text("SELECT EXISTS (SELECT 1 FROM notifications WHERE type = :t)"), {"t": key}
    ).scalar_one()


# A stored preference is a deviation; making the type mandatory overrides the ones that differ from
# the (new) defaults, because the resolving SQL then ignores them.
OVERRIDES_SQL = sa.text(
    """
SELECT count(DISTINCT user_id) FROM notification_preferences
WHERE type = :type
  AND enabled <> CASE channel WHEN 'in_app' THEN :in_app WHEN 'email' THEN :email ELSE :push END
"""
)


def mandatory_overrides(key: str, in_app: bool, email: bool, push: bool) -> int:
    """Return how many users have deviations that a mandatory type with these defaults overrides."""
    params = {"type": key, "in_app": in_app, "email": email, "push": push}
    return db.session.execute(OVERRIDES_SQL, params).scalar_one()


# --- templates ----------------------------------------------------------------------------------

TEMPLATES_SQL = sa.text(
    """
SELECT m.id, m.type, t.label, m.channel, m.locale, m.updated_at, u.email AS updated_by,
       (SELECT count(*) FROM message_template_versions v WHERE v.template_id = m.id) AS versions
FROM message_templates m
JOIN notification_types t ON t.type = m.type
LEFT JOIN users u ON u.id = m.updated_by
ORDER BY m.type, m.channel, m.locale
"""
)


def message_templates() -> list:
    """Return every template with who changed it last and how many versions it keeps."""
    return list(db.session.execute(TEMPLATES_SQL).mappings())


def message_template(type_: str, channel: str, locale: str) -> MessageTemplate | None:
    """Return the template for (type, channel, locale), if any."""
    return db.session.scalars(
        sa.select(MessageTemplate).where(
            MessageTemplate.type == type_, MessageTemplate.channel == channel, MessageTemplate.locale == locale
        )
    ).first()


def template_locales(type_: str, channel: str) -> set[str]:
    """Return the locales that have a template for (type, channel)."""
    rows = db.session.scalars(
        sa.select(MessageTemplate.locale).where(MessageTemplate.type == type_, MessageTemplate.channel == channel)
    )
    return {locale.lower() for locale in rows}


VERSIONS_LIMIT = 50


def template_versions(template_id: int) -> list:
    """Return the template's kept versions, newest first, with who saved each."""
    stmt = (
        sa.select(
            TemplateVersion.id,
            TemplateVersion.subject,
            TemplateVersion.body_text,
            TemplateVersion.body_html,
            TemplateVersion.created_at,
            User.email.label("updated_by"),
        )
        .outerjoin(User, User.id == TemplateVersion.updated_by)
        .where(TemplateVersion.template_id == template_id)
        .order_by(TemplateVersion.id.desc())
        .limit(VERSIONS_LIMIT)
    )
    return list(db.session.execute(stmt).mappings())


def template_version(template_id: int, version_id: int) -> TemplateVersion | None:
    """Return one kept version of the template, if it belongs to it."""
    version = db.session.get(TemplateVersion, version_id)
    return version if version is not None and version.template_id == template_id else None


# --- suppressions -------------------------------------------------------------------------------

PAGE_SIZE = 50

# `address >= :prefix` lets the primary-key index start at the prefix; starts_with keeps the
# answer right under any collation, and `address > :after` is the keyset.
SUPPRESSIONS_SQL = sa.text(
    """
SELECT address, reason, detail, created_at
FROM email_suppressions
WHERE address >= :prefix AND starts_with(address, :prefix) AND address > :after
ORDER BY address
LIMIT :limit
"""
)


def suppressions(prefix: str = "", after: str = "", limit: int = PAGE_SIZE) -> Page:
    """Return suppressed addresses starting with prefix, in address order, after `after`."""
    params = {"prefix": prefix.strip().lower(), "after": after, "limit": limit + 1}
    rows = list(db.session.execute(SUPPRESSIONS_SQL, params).mappings())
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, rows[-1]["address"] if more else None)


# --- users --------------------------------------------------------------------------------------


def search_users(q: str = "", role: str = "", after_id: int = 0, limit: int = PAGE_SIZE) -> Page:
    """Find users by e-mail prefix, exact external id or name fragment; keyset on id."""
    conditions = ["id > :after"]
    params: dict = {"after": after_id, "limit": limit + 1}
    q = q.strip()
    if q:
        conditions.append(
            "(lower(email) LIKE :prefix ESCAPE '\\' OR external_id = :q OR display_name ILIKE :contains ESCAPE '\\')"
        )
        params.update(q=q, prefix=like_prefix(q.lower()), contains="%" + like_prefix(q))
    if role:
        conditions.append("role = :role")
        params["role"] = role
    sql = sa.text(f"""SELECT id, email, external_id, display_name, role, locale, timezone, created_at
FROM users WHERE {" AND ".join(conditions)} ORDER BY id LIMIT :limit""")
    rows = list(db.session.execute(sql, params).mappings())
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, str(rows[-1]["id"]) if more else None)


def user(user_id: int) -> User | None:
    """Return the user with this id, if any."""
    return db.session.get(User, user_id)


# --- API keys -----------------------------------------------------------------------------------

API_KEYS_SQL = sa.text(
    """
SELECT k.id, k.name, k.prefix, k.created_at, k.last_used_at, k.revoked_at, u.email AS created_by
FROM api_keys k LEFT JOIN users u ON u.id = k.created_by
ORDER BY k.revoked_at IS NOT NULL, k.created_at DESC, k.id DESC
LIMIT 500
"""
)


def api_keys() -> list:
    """Return the API keys (live ones first) with prefix, last use and who created them."""
    return list(db.session.execute(API_KEYS_SQL).mappings())


# --- audit log ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditFilters:
    """What the audit page narrows by; empty values mean "any"."""

    actor: str = ""
    action: str = ""
    target_type: str = ""
    target_id: str = ""
    since: datetime | None = None
    until: datetime | None = None
    errors: list[str] = field(default_factory=list)


def _audit_conditions(filters: AuditFilters) -> tuple[list[str], dict]:
    conditions: list[str] = []
    params: dict = {}
    actor = filters.actor.strip().lower()
    if actor == "cli":
        conditions.append("actor_id IS NULL")
    elif actor:
        conditions.append("lower(actor_label) = :actor")
        params["actor"] = actor
    if filters.action:
        # "announcement" matches every announcement.* action; "announcement.create" only itself.
        conditions.append("(action = :action OR action LIKE :action_prefix ESCAPE '\\')")
        params.update(action=filters.action, action_prefix=like_prefix(filters.action + "."))
    for name in ("target_type", "target_id"):
        if getattr(filters, name):
            conditions.append(f"{name} = :{name}")
            params[name] = getattr(filters, name)
    if filters.since:
        conditions.append("created_at >= :since")
        params["since"] = filters.since
    if filters.until:
        conditions.append("created_at < :until")
        params["until"] = filters.until
    return conditions, params


def audit_page(filters: AuditFilters | None = None, cursor: str | None = None, limit: int = PAGE_SIZE) -> Page:
    """Return one page of the audit log, newest first, keyset on (created_at, id)."""
    conditions, params = _audit_conditions(filters or AuditFilters())
    position = Cursor.decode(cursor)
    if position:
        conditions.append("(created_at, id) < (:c_at, :c_id)")
        params.update(c_at=position.created_at, c_id=position.id)
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    sql = sa.text(f"""SELECT id, actor_id, actor_label, action, target_type, target_id, before, after, created_at
FROM audit_log {where} ORDER BY created_at DESC, id DESC LIMIT :limit""")
    rows = list(db.session.execute(sql, {**params, "limit": limit + 1}).mappings())
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, Cursor(rows[-1]["created_at"], rows[-1]["id"]).encode() if more else None)
