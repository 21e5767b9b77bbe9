"""Message template reads: the list, one template, the locales that have one, kept versions."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.models import MessageTemplate, TemplateVersion, User
from app.sqltext import like_prefix

TEMPLATES_SQL = """
SELECT m.id, m.type, t.label, m.channel, m.locale, m.updated_at, u.email AS updated_by,
       (SELECT count(*) FROM message_template_versions v WHERE v.template_id = m.id) AS versions
FROM message_templates m
JOIN notification_types t ON t.type = m.type
LEFT JOIN users u ON u.id = m.updated_by
{where}
ORDER BY m.type, m.channel, m.locale
LIMIT 2000
"""


def message_templates(q: str = "", channel: str = "", locale: str = "", type_: str = "") -> list:
    """Return every template with who changed it last and how many versions it keeps, optionally narrowed.

    q: type key, type label, subject or body containing it (case-insensitive; % and _ literal);
    channel and type_: exactly; locale: that locale and its regional ones (ja matches ja-jp).
    """
    conditions, params = [], {}
    if q.strip():
        conditions.append(
            "(m.type ILIKE :contains ESCAPE '\\' OR t.label ILIKE :contains ESCAPE '\\'"
            " OR m.subject ILIKE :contains ESCAPE '\\' OR m.body_text ILIKE :contains ESCAPE '\\')"
        )
        params["contains"] = "%" + like_prefix(q.strip())
    if channel:
        conditions.append("m.channel = :channel")
        params["channel"] = channel
    if type_:
        conditions.append("m.type = :type")
        params["type"] = type_
    if locale.strip():
        conditions.append("(lower(m.locale) = :locale OR lower(m.locale) LIKE :regional ESCAPE '\\')")
        params.update(locale=locale.strip().lower(), regional=like_prefix(locale.strip().lower() + "-"))
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    return list(db.session.execute(sa.text(TEMPLATES_SQL.format(where=where)), params).mappings())


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


def count() -> int:
    """How many templates exist."""
    return db.session.execute(sa.text("SELECT count(*) FROM message_templates")).scalar_one()
