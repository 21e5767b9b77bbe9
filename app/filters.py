"""A list's filters as SQL: the conditions a filled-in filter adds, the keyset condition, and one page of rows.

The console's logs (delivery log, dead-letter queue, audit log) narrow the same way: a value left
empty means "any" and adds nothing; every value is a bound parameter, never SQL text; a time window is
half-open [since, until), so adjacent windows never count a row twice. Column names come from the
calling query module, never from the request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from app.extensions import db
from app.pagination import Cursor, Page


@dataclass(frozen=True)
class Filters:
    """What every log narrows by: a time window; errors holds a message for each value that could not be read."""

    since: datetime | None = None
    until: datetime | None = None
    errors: list[str] = field(default_factory=list)


class Where:
    """SQL conditions joined by AND, and their parameters, built one filter at a time."""

    def __init__(self, *conditions: str) -> None:
        self.conditions: list[str] = list(conditions)
        self.params: dict = {}

    def add(self, condition: str, **params) -> Where:
        """Add a condition with its parameters."""
        self.conditions.append(condition)
        self.params.update(params)
        return self

    def equal(self, column: str, name: str, value) -> Where:
        """column = :name, when value is given."""
        return self.add(f"{column} = :{name}", **{name: value}) if value else self

    def window(self, column: str, since: datetime | None, until: datetime | None) -> Where:
        """since <= column < until, each bound when given."""
        if since:
            self.add(f"{column} >= :since", since=since)
        if until:
            self.add(f"{column} < :until", until=until)
        return self

    def before_id(self, column: str, cursor: int | None) -> Where:
        """The keyset of a list ordered by id descending: rows after the cursor's."""
        return self.add(f"{column} < :cursor_id", cursor_id=cursor) if cursor else self

    def before_time(self, time_column: str, id_column: str, cursor: Cursor | None) -> Where:
        """The keyset of a list ordered by (time, id) descending: rows after the cursor's."""
        if cursor is None:
            return self
        return self.add(
            f"({time_column}, {id_column}) < (:cursor_at, :cursor_id)", cursor_at=cursor.created_at, cursor_id=cursor.id
        )

    def parts(self) -> tuple[list[str], dict]:
        """The conditions and the parameters (for statements that place them themselves)."""
        return list(self.conditions), dict(self.params)

    @property
    def sql(self) -> str:
        """The WHERE clause, or "" when nothing narrows."""
        return f"WHERE {' AND '.join(self.conditions)}" if self.conditions else ""


def keyset_page(sql: str, params: dict, limit: int, cursor_of: Callable[[object], str]) -> Page:
    """Run a statement ending in `LIMIT :limit` for limit + 1 rows; return one Page of limit rows."""
    rows = list(db.session.execute(sa.text(sql), {**params, "limit": limit + 1}).mappings())
    return Page.of(rows, limit, cursor_of)
