"""Notification type reads: the list with template counts, one type, whether a key is in use."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.models import NotificationType
from app.sqltext import like_prefix

TYPES_SQL = """
SELECT t.type, t.label, t.description, t.default_in_app, t.default_email, t.default_push,
       t.mandatory, t.priority, t.escalate_after, t.escalate_unless, t.skip_when_online, t.cap_count, t.cap_window,
       t.bypass_quiet_hours, t.push_when_offline,
       t.email_frequency, t.aggregation_window,
       w.version AS workflow_version, w.steps AS workflow_steps,
       (SELECT count(*) FROM message_templates m WHERE m.type = t.type) AS templates
FROM notification_types t
LEFT JOIN workflow_versions w ON w.id = t.workflow_version_id
{where}
ORDER BY t.type
LIMIT 1000
"""
CHANNEL_DEFAULTS = {"in_app": "t.default_in_app", "email": "t.default_email", "push": "t.default_push"}


def notification_types(q: str = "", channel: str = "", mandatory: str = "", priority: str = "") -> list:
    """Return every type with its defaults and how many templates it has, optionally narrowed.

    q: key, label or description containing it (case-insensitive; % and _ literal); channel: types sent
    on that channel by default; mandatory: "yes" or "no"; priority: high, default or low.
    """
    conditions, params = [], {}
    if q.strip():
        conditions.append(
            "(t.type ILIKE :contains ESCAPE '\\' OR t.label ILIKE :contains ESCAPE '\\'"
            " OR t.description ILIKE :contains ESCAPE '\\'"
            # The variants' words too (a Japanese label finds its type); the keys and quotes only cost false hits.
            " OR CAST(t.locales AS text) ILIKE :contains ESCAPE '\\')"
        )
        params["contains"] = "%" + like_prefix(q.strip())
    if channel in CHANNEL_DEFAULTS:
        conditions.append(CHANNEL_DEFAULTS[channel])
    if mandatory in ("yes", "no"):
        conditions.append("t.mandatory" if mandatory == "yes" else "NOT t.mandatory")
    if priority:
        conditions.append("t.priority = :priority")
        params["priority"] = priority
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    return list(db.session.execute(sa.text(TYPES_SQL.format(where=where)), params).mappings())


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


def count() -> int:
    """How many notification types exist."""
    return db.session.execute(sa.text("SELECT count(*) FROM notification_types")).scalar_one()
