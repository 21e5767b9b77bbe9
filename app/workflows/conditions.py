"""Workflow conditions in the Common Expression Language (CEL), checked when saved and evaluated when a step is due.

The `common-expression-language` package (the Rust cel interpreter) compiles and runs them. CEL has no loops
or recursion, so an evaluation's cost is bounded by what it is given and what it walks, and both are bounded
here before it runs (a Rust call cannot be interrupted, so the limit is enforced up front, not by a timer):
- the source: at most CONDITION_MAX_CHARS, at most MAX_COMPREHENSIONS list macro (all, exists, map…);
- the payload: only the top-level fields of `data` the condition names are handed over (converting a large
  payload costs more than evaluating), and those at most CONDITION_DATA_MAX_BYTES as JSON;
- a macro's walk: the longest list handed over times the condition's size stays under CONDITION_WORK_MAX.
Past a limit the condition is undecided, which counts as false (the step is skipped, with the reason).
tests/workflows/test_conditions.py measures the worst case allowed against CONDITION_TIME_LIMIT_MS.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import cel
from flask_babel import gettext

# What a condition may name: the payload, the member, the notification's state, its tenant (issue 32).
ROOTS = ("data", "recipient", "notification", "tenant")
CONDITION_MAX_CHARS = 500
MAX_COMPREHENSIONS = 1
CONDITION_DATA_MAX_BYTES = 16 * 1024
CONDITION_WORK_MAX = 100_000  # list elements walked × tokens of the condition
CONDITION_TIME_LIMIT_MS = 10.0  # what the worst case allowed takes at most (measured by the test)
_COMPREHENSION = re.compile(r"\.\s*(all|exists_one|exists|map|filter)\s*\(\s*([A-Za-z_]\w*)?")
_DATA_FIELD = re.compile(r"""\bdata\s*(\.\s*([A-Za-z_]\w*)|\[\s*(['"])([^'"]*)\3\s*\])?""")
_TOKEN = re.compile(r"\w+|[^\w\s]")


class ConditionError(ValueError):
    """A condition that does not compile, names something it may not, or is too large."""


@dataclass(frozen=True)
class Checked:
    """A condition that compiled, with the program to run and what bounds its cost."""

    source: str
    program: object
    data_fields: tuple[str, ...] | None  # the fields of `data` it names (None: it reads `data` as a whole)
    walks: bool  # it has a list macro
    tokens: int


def _data_fields(text: str) -> tuple[str, ...] | None:
    fields = []
    for match in _DATA_FIELD.finditer(text):
        name = match.group(2) or match.group(4)
        if name is None:
            return None
        fields.append(name)
    return tuple(dict.fromkeys(fields))


def check(source: str) -> Checked:
    """Compile source, or raise ConditionError saying what is wrong (in words an operator can act on)."""
    text = source.strip()
    if not text:
        raise ConditionError(gettext("Write a condition, or leave the field empty."))
    if len(text) > CONDITION_MAX_CHARS:
        raise ConditionError(gettext("A condition has at most %(max)s characters.", max=CONDITION_MAX_CHARS))
    if len(_COMPREHENSION.findall(text)) > MAX_COMPREHENSIONS:
        raise ConditionError(
            gettext("A condition may use one list macro (all, exists, exists_one, map, filter) at most.")
        )
    try:
        program = cel.compile(text)
    except ValueError as error:
        raise ConditionError(gettext("Not valid CEL: %(error)s", error=_first_line(str(error)))) from None
    bound = {match.group(2) for match in _COMPREHENSION.finditer(text)}  # a macro's own variable
    unknown = sorted(set(program.variables()) - set(ROOTS) - bound)
    if unknown:
        raise ConditionError(
            gettext("Unknown name %(name)s: a condition reads %(roots)s.", name=unknown[0], roots=", ".join(ROOTS))
        )
    walks = bool(_COMPREHENSION.search(text))
    return Checked(text, program, _data_fields(text), walks, len(_TOKEN.findall(text)))


@lru_cache(maxsize=512)
def _compiled(source: str) -> Checked:
    return check(source)


def context(data: dict | None, recipient: Mapping[str, object], *, read: bool, seen: bool,
            type_: str | None = None, tenant: Mapping[str, object] | None = None) -> dict:  # fmt: skip
    """What a condition sees: the payload, the member (external_id, locale, timezone, properties), the
    notification's state and its tenant (key and name; empty for a notification sent for none)."""
    member = {name: recipient.get(name) for name in ("external_id", "locale", "timezone")}
    member["properties"] = recipient.get("properties") or {}
    return {"data": data or {}, "recipient": member,
            "notification": {"type": type_, "read": read, "seen": seen}, "tenant": dict(tenant or {})}  # fmt: skip


def evaluate(source: str, context: Mapping[str, object]) -> bool:
    """Whether source holds in context; a condition that cannot be decided (a missing field, a type mismatch,
    a limit passed) is false, so a step whose condition is unsure is skipped rather than sent."""
    return explain(source, context)[0]


def explain(source: str, context: Mapping[str, object]) -> tuple[bool, str | None]:
    """(holds, why not): the error or limit that made an evaluation false, for the test run and the trace."""
    try:
        checked = _compiled(source)
    except ConditionError as error:
        return False, str(error)
    given = dict(context)
    data = given.get("data") or {}
    if checked.data_fields is not None and isinstance(data, Mapping):
        data = {name: data[name] for name in checked.data_fields if name in data}
    size = len(json.dumps(data, separators=(",", ":"), default=str))
    if size > CONDITION_DATA_MAX_BYTES:
        return False, f"the payload it reads is {size} bytes (at most {CONDITION_DATA_MAX_BYTES})"
    if checked.walks and _longest_list(data) * checked.tokens > CONDITION_WORK_MAX:
        return False, f"walking {_longest_list(data)} elements is more than its limit allows"
    given["data"] = data
    try:
        result = checked.program.execute(given)
    except (RuntimeError, TypeError, ValueError, KeyError, OverflowError) as error:
        return False, _first_line(str(error)) or type(error).__name__
    if not isinstance(result, bool):
        return False, f"gave {type(result).__name__}, not true or false"
    return result, None


def _longest_list(value: object) -> int:
    """The longest list anywhere in value (what a macro may walk)."""
    if isinstance(value, Mapping):
        return max((_longest_list(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max(len(value), max((_longest_list(v) for v in value), default=0))
    return 0


def _first_line(message: str) -> str:
    lines = [line for line in message.splitlines() if line.strip()]
    return lines[0][:300] if lines else ""
