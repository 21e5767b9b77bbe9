"""An uploaded audience list: one external id per line, an optional header, checked before anything is sent.

Parsing is pure (bytes in, ids and problems out); resolving the ids against `users` is one statement
in app/campaigns/queries.py. A file that cannot be read at all (too big, not UTF-8, no ids) raises
ListError and nothing is created; single bad lines are reported with their line numbers and left out.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

from flask_babel import format_number, gettext

MAX_BYTES = 1_000_000
MAX_IDS = 100_000
ID_MAX_CHARS = 255
# The API's rule for external ids (app/api/schemas.py): no '/', no control characters.
BAD_ID_CHARS = re.compile(r"[/\x00-\x1f\x7f]")
HEADER_NAMES = {"external_id", "external id", "externalid", "id", "user", "user_id", "userid"}
REPORT_SAMPLE = 50


class ListError(ValueError):
    """The file as a whole cannot be used; the message says why."""


@dataclass(frozen=True)
class BadLine:
    """One line that was left out, and why."""

    line: int
    text: str
    problem: str


@dataclass
class ParsedList:
    """The distinct ids in file order, plus what was left out."""

    ids: list[str] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    duplicates: int = 0
    header: bool = False


def _problem(row: list[str]) -> str | None:
    values = [value.strip() for value in row]
    if sum(1 for value in values if value) > 1:
        return gettext("more than one value on the line (one external id per line)")
    value = next((v for v in values if v), "")
    if len(value) > ID_MAX_CHARS:
        return gettext("longer than %(max)s characters", max=ID_MAX_CHARS)
    if BAD_ID_CHARS.search(value):
        return gettext("contains '/' or a control character")
    return None


def parse(data: bytes) -> ParsedList:
    """Read one external id per line (a first line naming the column is skipped); raise ListError."""
    if len(data) > MAX_BYTES:
        raise ListError(
            gettext(
                "The file is larger than %(size)s kB; split the audience into several campaigns.",
                size=format_number(MAX_BYTES // 1000),
            )
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ListError(
            gettext("The file is not UTF-8 text (byte %(byte)s cannot be read).", byte=exc.start + 1)
        ) from None
    result, seen = ParsedList(), set()
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise ListError(gettext("The file is not readable as CSV: %(error)s.", error=str(exc))) from None
    for number, row in enumerate(rows, start=1):
        if not any(value.strip() for value in row):
            continue  # blank lines are harmless
        problem = _problem(row)
        if problem:
            result.bad_lines.append(BadLine(number, ",".join(row)[:120], problem))
            continue
        value = next(v.strip() for v in row if v.strip())
        if not seen and not result.header and not result.bad_lines and value.lower() in HEADER_NAMES:
            result.header = True
            continue
        if value in seen:
            result.duplicates += 1
            continue
        seen.add(value)
        result.ids.append(value)
        if len(result.ids) > MAX_IDS:
            raise ListError(
                gettext(
                    "The file has more than %(count)s ids; split the audience into several campaigns.",
                    count=format_number(MAX_IDS),
                )
            )
    if not result.ids:
        raise ListError(
            gettext("The file has no external ids.")
            if not result.bad_lines
            else gettext("No line of the file holds a usable external id.")
        )
    return result


def report(parsed: ParsedList, unknown: list[str], recipients: int) -> dict:
    """The JSON-friendly summary kept with the campaign and shown before it is sent."""
    return {
        "lines_read": len(parsed.ids) + len(parsed.bad_lines) + parsed.duplicates + int(parsed.header),
        "recipients": recipients,
        "duplicates": parsed.duplicates,
        "header": parsed.header,
        "unknown_count": len(unknown),
        "unknown": unknown[:REPORT_SAMPLE],
        "bad_count": len(parsed.bad_lines),
        "bad_lines": [{"line": b.line, "text": b.text, "problem": b.problem} for b in parsed.bad_lines[:REPORT_SAMPLE]],
    }
