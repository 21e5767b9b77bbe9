"""Audit log reads: one keyset page of entries, newest first, narrowed by actor, action, target and time."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from app.extensions import db
from app.pagination import Cursor, Page, time_cursor
from app.sqltext import like_prefix

PAGE_SIZE = 50


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
    return Page.of(rows, limit, time_cursor())


def changed_fields(before: dict | None, after: dict | None) -> list[tuple[str, object, object]]:
    """Return (field, before, after) for every field whose value differs (all fields on create/delete)."""
    before, after = before or {}, after or {}
    names = list(dict.fromkeys([*before.keys(), *after.keys()]))
    return [(name, before.get(name), after.get(name)) for name in names if before.get(name) != after.get(name)]
