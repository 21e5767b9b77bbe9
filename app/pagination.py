"""Keyset pagination, the one way lists page here: a page is the rows after a cursor, never rows skipped by count.

A query asks for `limit + 1` rows after the cursor; Page.of() keeps `limit` and, when the extra row
came back, makes the cursor of the next page from the last row kept. Two cursor shapes exist:
`Cursor` (timestamp, id) for lists ordered by time, encoded as an opaque URL-safe token, and a bare
id for lists ordered by id (parse_id_cursor). A malformed cursor means "the first page".
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

# PostgreSQL bigint: anything outside cannot be an id (and must not reach the server as one).
MAX_ID = 2**63 - 1


@dataclass(frozen=True)
class Cursor:
    """The last row of a page ordered by (a timestamp, id) descending: where the next page starts."""

    created_at: datetime
    id: int

    def encode(self) -> str:
        """Return an opaque URL-safe token."""
        raw = json.dumps([self.created_at.isoformat(), self.id]).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str | None) -> Cursor | None:
        """Parse a token from encode(); a malformed token means "first page"."""
        if not token:
            return None
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            created_at, row_id = json.loads(raw)
            position = cls(datetime.fromisoformat(created_at), int(row_id))
        except (ValueError, TypeError, json.JSONDecodeError):
            return None
        # A naive timestamp would be compared in the server's zone and silently skip rows.
        return position if position.created_at.tzinfo is not None else None


def parse_id_cursor(text: str | None) -> int | None:
    """Parse a cursor that is a row id (lists ordered by id); None for a missing or malformed one."""
    try:
        value = int(text or "")
    except ValueError:
        return None
    return value if is_id(value) else None


def is_id(value: int) -> bool:
    """Whether value can be a row id (a positive bigint)."""
    return 0 < value <= MAX_ID


@dataclass(frozen=True)
class Page:
    """One page of rows and the opaque cursor of the next page (None on the last page)."""

    rows: list
    next_cursor: str | None = None

    @classmethod
    def of(cls, rows: Sequence, limit: int, cursor_of: Callable[[object], str]) -> Page:
        """Keep the first `limit` of rows (fetched as limit + 1); the next cursor comes from the last one kept."""
        kept = list(rows[:limit])
        return cls(kept, cursor_of(kept[-1]) if len(rows) > limit else None)


def time_cursor(column: str = "created_at") -> Callable[[object], str]:
    """cursor_of for rows ordered by (column, id) descending."""
    return lambda row: Cursor(row[column], row["id"]).encode()


def id_cursor(row) -> str:
    """cursor_of for rows ordered by id."""
    return str(row["id"])
