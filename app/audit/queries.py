"""Audit log reads: one keyset page of entries, newest first, narrowed by actor, action, target and time."""

from __future__ import annotations

from dataclasses import dataclass

from app.filters import Filters, Where, keyset_page
from app.pagination import Cursor, Page, time_cursor
from app.sqltext import like_prefix

PAGE_SIZE = 50


@dataclass(frozen=True)
class AuditFilters(Filters):
    """What the audit page narrows by (and when the change was made); empty values mean "any"."""

    actor: str = ""
    action: str = ""
    target_type: str = ""
    target_id: str = ""

    def where(self) -> Where:
        """The conditions (columns of audit_log)."""
        where = Where()
        actor = self.actor.strip().lower()
        if actor == "cli":
            where.add("actor_id IS NULL")
        elif actor:
            where.add("lower(actor_label) = :actor", actor=actor)
        if self.action:
            # "announcement" matches every announcement.* action; "announcement.create" only itself.
            where.add(
                "(action = :action OR action LIKE :action_prefix ESCAPE '\\')",
                action=self.action,
                action_prefix=like_prefix(self.action + "."),
            )
        where.equal("target_type", "target_type", self.target_type).equal("target_id", "target_id", self.target_id)
        return where.window("created_at", self.since, self.until)


def audit_page(filters: AuditFilters | None = None, cursor: str | None = None, limit: int = PAGE_SIZE) -> Page:
    """Return one page of the audit log, newest first, keyset on (created_at, id)."""
    where = (filters or AuditFilters()).where().before_time("created_at", "id", Cursor.decode(cursor))
    sql = f"""SELECT id, actor_id, actor_label, action, target_type, target_id, before, after, created_at
FROM audit_log {where.sql} ORDER BY created_at DESC, id DESC LIMIT :limit"""
    return keyset_page(sql, where.params, limit, time_cursor())


def changed_fields(before: dict | None, after: dict | None) -> list[tuple[str, object, object]]:
    """Return (field, before, after) for every field whose value differs (all fields on create/delete)."""
    before, after = before or {}, after or {}
    names = list(dict.fromkeys([*before.keys(), *after.keys()]))
    return [(name, before.get(name), after.get(name)) for name in names if before.get(name) != after.get(name)]
