"""The sandbox's limits: how large a value a template may build, how long it may run, and the checks.

Every operation that can grow a value checks its result's size before it runs (MAX_SIZE characters or
items, nested values counted in full; MAX_INT_BITS for integers; MAX_WIDTH for format widths), and
tick() ends a render once the budget set by time_budget() is spent. app/delivery/sandbox.py wires these
checks into Jinja's environment; they live apart so that they can be read (and tested) without Jinja's.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Iterator, MappingView
from contextlib import contextmanager
from contextvars import ContextVar

from flask_babel import format_number, gettext
from jinja2.sandbox import SecurityError
from jinja2.utils import Namespace
from markupsafe import Markup

# The largest string, sequence or nested value a template may build (the output cap is 256 KiB).
MAX_SIZE = 512 * 1024
# Python prints ints of up to 4,300 digits (about 14,300 bits); nothing larger is ever useful here.
MAX_INT_BITS = 14_000
# Widths and precisions in `%` and `.format()` specs, and tojson's indent.
MAX_WIDTH = 10_000
MAX_INDENT = 16

_BUDGET: ContextVar[tuple[float, float] | None] = ContextVar("template_budget", default=None)


class TemplateLimitError(SecurityError):
    """The template went over a size, number or time limit of the sandbox."""


@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Give the renders inside the block `seconds` in all; a nested budget can only shorten it."""
    deadline = time.monotonic() + seconds
    current = _BUDGET.get()
    if current is not None and current[0] <= deadline:
        yield
        return
    token = _BUDGET.set((deadline, seconds))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def tick() -> None:
    """Raise once the current time budget is spent (compiled into loops, calls and filters)."""
    budget = _BUDGET.get()
    if budget is not None and time.monotonic() > budget[0]:
        raise TemplateLimitError(
            gettext("the template ran longer than its %(seconds)s s time budget", seconds=f"{budget[1]:g}")
        )


def limit(size: int, what: str) -> None:
    """Raise when something a template builds would be larger than MAX_SIZE."""
    if size > MAX_SIZE:
        raise TemplateLimitError(
            gettext(
                "%(what)s would be %(size)s characters or items; the limit is %(limit)s",
                what=what,
                size=format_number(size),
                limit=format_number(MAX_SIZE),
            )
        )


def check_int_bits(value: int) -> None:
    """Raise when an integer is longer than MAX_INT_BITS."""
    if value.bit_length() > MAX_INT_BITS:
        raise TemplateLimitError(
            gettext("a number would have more than %(bits)s bits", bits=format_number(MAX_INT_BITS))
        )


_FLAT = (type(None), bool, float)
_SEQUENCES = (list, tuple, set, frozenset, deque, MappingView)


def weight(value) -> int:
    """How large value prints: characters of strings, items of containers weighted by their depth.

    Shared references count every time they are reached (`[s] * 1000` prints s a thousand times);
    the walk stops as soon as it passes MAX_SIZE, so it costs at most MAX_SIZE steps.
    """
    kind = type(value)
    if kind is str or kind is Markup:
        return len(value)
    if kind is int:
        check_int_bits(value)
        return 1
    if isinstance(value, _FLAT):
        return 1
    total, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = [child for pair in item.items() for child in pair]
        elif isinstance(item, _SEQUENCES):
            children = item
        elif isinstance(item, Namespace):
            children = [item._Namespace__attrs]  # its repr prints every attribute
        else:
            total += _leaf_weight(item)
            limit(total, "a value")
            continue
        total += depth * (len(children) + 1)
        limit(total, "a value")
        for child in children:  # strings and numbers inline: flat lists cost one pass
            kind = type(child)
            if kind is str or kind is Markup:
                total += len(child)
            elif kind is int:
                check_int_bits(child)
                total += 1
            elif isinstance(child, _FLAT):
                total += 1
            else:
                stack.append((child, depth + 1))
        limit(total, "a value")
    return total


def _leaf_weight(item) -> int:
    if isinstance(item, str | bytes):
        return len(item)
    if isinstance(item, int):
        check_int_bits(item)
    return 1


def check_size(value):
    """Return value, or raise when it is larger than the sandbox allows (also the output finalizer)."""
    if type(value) is not str or len(value) > MAX_SIZE:  # the common case costs one type check
        weight(value)
    return value


# printf-style specs: %[(key)][flags][width][.precision][length]type
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?([a-zA-Z%])")
WIDTH_DIGITS = re.compile(r"\d+")


def check_width(number: str) -> int:
    """A format width or precision as an int, or raise when it is over MAX_WIDTH."""
    if len(number) > 6 or int(number) > MAX_WIDTH:
        raise TemplateLimitError(
            gettext(
                "a format width or precision of %(number)s is over the limit of %(limit)s",
                number=number,
                limit=format_number(MAX_WIDTH),
            )
        )
    return int(number)


def check_printf(fmt, args) -> None:
    """Bound `fmt % args` before Python builds it: every width and precision, and the result size."""
    if not isinstance(fmt, str):
        return
    estimate, args_size = len(fmt), weight(args)
    for width, precision, _kind in _PRINTF.findall(fmt):
        if "*" in (width, precision):
            raise TemplateLimitError("'*' widths in % formats are not supported in templates")
        estimate += max(check_width(width) if width else 0, check_width(precision) if precision else 0) + args_size + 32
    limit(estimate, "the formatted string")


# Binary operators whose result can be far larger than their operands.
def check_binop(operator: str, left, right) -> None:
    """Raise before a binary operator builds a result larger than the sandbox allows."""
    if operator == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            if right * max(1, abs(left).bit_length() - 1) > MAX_INT_BITS:
                raise TemplateLimitError(
                    gettext("a number would have more than %(bits)s bits", bits=format_number(MAX_INT_BITS))
                )
    elif operator == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, str | bytes | list | tuple) and isinstance(times, int) and times > 0:
                limit(len(seq) * times, "the repeated value")
        if isinstance(left, int) and isinstance(right, int):
            if left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
                raise TemplateLimitError(
                    gettext("a number would have more than %(bits)s bits", bits=format_number(MAX_INT_BITS))
                )
    elif operator == "+":
        if isinstance(left, str | bytes | list | tuple) and isinstance(right, str | bytes | list | tuple):
            limit(len(left) + len(right), "the joined value")
    elif operator == "%":
        check_printf(left, right)


# str and bytes methods whose result can be far larger than the string they are called on.
def _arg(args: tuple, kwargs: dict, index: int, name: str, default=None):
    return args[index] if len(args) > index else kwargs.get(name, default)


def replace_size(s, old, new, count) -> int:
    """Length of s.replace(old, new, count) without building it."""
    found = s.count(old) if old else len(s) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(s) + found * max(0, len(new) - len(old))


def check_method(owner, name: str, args: tuple, kwargs: dict) -> tuple:
    """Check a str/bytes method call before it runs; returns the args to call it with."""
    if name in ("ljust", "rjust", "center", "zfill"):
        width = _arg(args, kwargs, 0, "width", 0)
        if isinstance(width, int):
            limit(width, f"{name}()")
    elif name == "expandtabs":
        size = _arg(args, kwargs, 0, "tabsize", 8)
        if isinstance(size, int):
            limit(len(owner) + owner.count("\t" if isinstance(owner, str) else b"\t") * size, "expandtabs()")
    elif name == "replace" and len(args) >= 2:
        old, new = args[0], args[1]
        if isinstance(old, type(owner)) and isinstance(new, type(owner)):
            limit(replace_size(owner, old, new, _arg(args, kwargs, 2, "count", -1)), "replace()")
    elif name == "join" and args:
        items = args[0] if isinstance(args[0], list | tuple) else list(args[0])
        sizes = sum(len(item) for item in items if isinstance(item, str | bytes))
        limit(len(owner) * len(items) + sizes, "join()")
        args = (items, *args[1:])
    elif name == "translate" and args and isinstance(args[0], dict):
        longest = max((len(v) for v in args[0].values() if isinstance(v, str | bytes)), default=1)
        limit(len(owner) * max(longest, 1), "translate()")
    return args
