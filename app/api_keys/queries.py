"""API key reads: each key's prefix, scopes, last use and creator (the keys themselves are never stored)."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.sqltext import like_prefix

API_KEYS_SQL = """
SELECT k.id, k.name, k.prefix, k.scopes, k.created_at, k.last_used_at, k.revoked_at, u.email AS created_by,
       k.rate_per_second, k.rate_burst, k.daily_quota
FROM api_keys k LEFT JOIN users u ON u.id = k.created_by
{where}
ORDER BY k.revoked_at IS NOT NULL, k.created_at DESC, k.id DESC
LIMIT 500
"""
STATES = ("live", "revoked")


def api_keys(q: str = "", state: str = "", scope: str = "") -> list:
    """Return the API keys (live ones first) with prefix, scopes, last use and who created them.

    q narrows to names containing it or prefixes starting with it (case-insensitive; % and _ literal);
    state to live or revoked keys; scope to keys holding that scope.
    """
    conditions, params = [], {}
    if q.strip():
        conditions.append("(k.name ILIKE :contains ESCAPE '\\' OR k.prefix LIKE :prefix ESCAPE '\\')")
        params.update(contains="%" + like_prefix(q.strip()), prefix=like_prefix(q.strip().rstrip("…")))
    if state:
        conditions.append("k.revoked_at IS NULL" if state == "live" else "k.revoked_at IS NOT NULL")
    if scope:
        conditions.append(":scope = ANY(k.scopes)")
        params["scope"] = scope
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    return list(db.session.execute(sa.text(API_KEYS_SQL.format(where=where)), params).mappings())


def live_count() -> int:
    """How many keys are not revoked."""
    return db.session.execute(sa.text("SELECT count(*) FROM api_keys WHERE revoked_at IS NULL")).scalar_one()
