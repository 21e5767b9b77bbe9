"""A workflow's history as the console shows it: each published version, who published it, and what it changed.

A version's document is shown as YAML (the canonical JSON, keys in its own order), and its change as a unified
diff against the version before it, line by line, so a reader sees exactly which step and field moved.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
import yaml

from app.extensions import db
from app.workflows.queries import HISTORY_LIMIT

HISTORY_SQL = sa.text(
    """
SELECT v.id, v.version, v.steps, v.note, v.restored_from, v.published_at, u.email AS published_by,
       v.id = t.workflow_version_id AS current
FROM workflow_versions v
JOIN notification_types t ON t.type = v.type
LEFT JOIN users u ON u.id = v.published_by
WHERE v.type = :type
ORDER BY v.version DESC
LIMIT :limit
"""
)


@dataclass(frozen=True)
class DiffLine:
    """One line of a diff: add, del, same, or hunk (where the next lines are)."""

    kind: str
    text: str


@dataclass(frozen=True)
class Entry:
    """One published version with its change against the one before (None: the first version shown)."""

    version: int
    published_at: datetime
    published_by: str | None
    note: str
    restored_from: int | None
    current: bool
    document: str
    diff: list[DiffLine] | None

    @property
    def added(self) -> int:
        """How many lines it added."""
        return sum(1 for line in self.diff or () if line.kind == "add")

    @property
    def removed(self) -> int:
        """How many lines it removed."""
        return sum(1 for line in self.diff or () if line.kind == "del")


def as_yaml(steps: dict) -> str:
    """A version's document as YAML, in its canonical key order."""
    return yaml.safe_dump(steps, sort_keys=False, allow_unicode=True)


def diff(before: str, after: str) -> list[DiffLine]:
    """The unified diff from before to after (YAML texts), without its file header lines."""
    lines = []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=3):
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            lines.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            lines.append(DiffLine("add", line[1:]))
        elif line.startswith("-"):
            lines.append(DiffLine("del", line[1:]))
        else:
            lines.append(DiffLine("same", line[1:]))
    return lines


def history(type_: str) -> list[Entry]:
    """The type's versions, newest first (at most HISTORY_LIMIT), each with its diff against the one before."""
    rows = list(db.session.execute(HISTORY_SQL, {"type": type_, "limit": HISTORY_LIMIT}).mappings())
    texts = {row["version"]: as_yaml(row["steps"]) for row in rows}
    return [
        Entry(
            version=row["version"],
            published_at=row["published_at"],
            published_by=row["published_by"],
            note=row["note"],
            restored_from=row["restored_from"],
            current=bool(row["current"]),
            document=texts[row["version"]],
            diff=diff(texts[row["version"] - 1], texts[row["version"]]) if row["version"] - 1 in texts else None,
        )
        for row in rows
    ]
