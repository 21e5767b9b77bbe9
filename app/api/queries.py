"""Reads behind the API's CLI: the key list (prefixes only; the keys themselves are never stored)."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db

KEYS_SQL = sa.text(
    """
SELECT name, prefix, created_at, last_used_at, revoked_at
FROM api_keys
ORDER BY created_at, id
"""
)


def api_keys() -> list:
    """Return every key's name, prefix and timestamps, oldest first."""
    return list(db.session.execute(KEYS_SQL).mappings())
