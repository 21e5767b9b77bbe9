"""Suppression reads: addresses by prefix, in address order (keyset), and how many there are."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.pagination import Page

PAGE_SIZE = 50

# `address >= :prefix` lets the primary-key index start at the prefix; starts_with keeps the
# answer right under any collation, and `address > :after` is the keyset.
SUPPRESSIONS_SQL = """
SELECT address, reason, detail, created_at
FROM email_suppressions
WHERE address >= :prefix AND starts_with(address, :prefix) AND address > :after {narrow}
ORDER BY address
LIMIT :limit
"""


def suppressions(prefix: str = "", after: str = "", limit: int = PAGE_SIZE, reason: str = "") -> Page:
    """Return suppressed addresses starting with prefix, in address order, after `after` (one reason, if given)."""
    params = {"prefix": prefix.strip().lower(), "after": after, "limit": limit + 1}
    narrow = ""
    if reason:
        narrow = "AND reason = :reason"
        params["reason"] = reason
    rows = list(db.session.execute(sa.text(SUPPRESSIONS_SQL.format(narrow=narrow)), params).mappings())
    return Page.of(rows, limit, lambda row: row["address"])


COUNT_CAP = 10_000


def count(cap: int = COUNT_CAP) -> int:
    """How many addresses are suppressed, counting at most cap + 1 (more shows as "over cap")."""
    sql = sa.text("SELECT count(*) FROM (SELECT 1 FROM email_suppressions LIMIT :cap) s")
    return db.session.execute(sql, {"cap": cap + 1}).scalar_one()
