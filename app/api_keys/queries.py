"""API key reads: each key's prefix, scopes, last use and creator (the keys themselves are never stored)."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db

API_KEYS_SQL = sa.text(
    """
SELECT k.id, k.name, k.prefix, k.scopes, k.created_at, k.last_used_at, k.revoked_at, u.email AS created_by
FROM api_keys k LEFT JOIN users u ON u.id = k.created_by
ORDER BY k.revoked_at IS NOT NULL, k.created_at DESC, k.id DESC
LIMIT 500
"""
)


def api_keys() -> list:
    """Return the API keys (live ones first) with prefix, scopes, last use and who created them."""
    return list(db.session.execute(API_KEYS_SQL).mappings())


def live_count() -> int:
    """How many keys are not revoked."""
    return db.session.execute(sa.text("SELECT count(*) FROM api_keys WHERE revoked_at IS NULL")).scalar_one()
