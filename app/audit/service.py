"""The audit log: who changed what, when, with the state before and after."""

from __future__ import annotations

from typing import Any

from app.extensions import db
from app.models import AuditEntry


def actor_of(user) -> tuple[int | None, str]:
    """Return (actor_id, label) for a signed-in user, an API key (its label), or the CLI when there is none."""
    if getattr(user, "audit_label", None):
        return None, user.audit_label
    if user is None or not getattr(user, "is_authenticated", False):
        return None, "cli"
    return user.id, user.email or f"user {user.id}"


def record(
    user, action: str, target_type: str, target_id: Any = "", *, before: dict | None = None, after: dict | None = None
) -> AuditEntry:
    """Add an audit row in the caller's transaction (flush, never commit)."""
    actor_id, label = actor_of(user)
    entry = AuditEntry(
        actor_id=actor_id,
        actor_label=label,
        action=action,
        target_type=target_type,
        target_id=str(target_id),
        before=before,
        after=after,
    )
    db.session.add(entry)
    db.session.flush()
    return entry


def snapshot(obj, fields: tuple[str, ...]) -> dict:
    """Return a JSON-friendly dict of obj's fields for before/after columns."""
    result = {}
    for name in fields:
        value = getattr(obj, name)
        result[name] = value.isoformat() if hasattr(value, "isoformat") else value
    return result


# The actions the console and the CLI write (suggestions for the audit page's filter; other
# modules may record more, and the filter accepts any text).
ACTIONS = (
    "announcement.create",
    "announcement.update",
    "announcement.publish",
    "announcement.expire",
    "announcement.delete",
    "type.create",
    "type.update",
    "workflow.draft",
    "workflow.discard",
    "workflow.publish",
    "template.save",
    "template.restore",
    "suppression.lift",
    "api_key.create",
    "api_key.revoke",
    "api_key.scopes",
    "user.create",
    "user.update",
    "user.role",
    "campaign.create",
    "campaign.send",
    "campaign.schedule",
    "campaign.cancel",
    "campaign.resume",
    "campaign.delete",
    "dlq.replay",
    "dlq.discard",
    "dlq.replay_all",
    "dlq.discard_all",
    "tenant.create",
    "tenant.update",
    "tenant.delete",
    "tenant.members",
    "tenant.preferences",
)
TARGET_TYPES = (
    "announcement",
    "notification_type",
    "message_template",
    "email_suppression",
    "api_key",
    "user",
    "campaign",
    "delivery",
    "bulk_operation",
    "tenant",
)
