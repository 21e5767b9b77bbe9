"""The bounded Jinja sandbox for operator templates: limits on sizes, numbers, widths and time.

Jinja's own sandbox stops attribute escapes but lets a template compute `'a' * 10**9`, `9**(9**9)`,
`'x'|center(10**9)` or nested `range(100000)` loops, all before the caller can look at the output.
Here every operation that can grow a value checks its result's size first (MAX_SIZE characters or
items, nested values counted in full; MAX_INT_BITS for integers), `lipsum` is gone, and a clock
check compiled into every loop body, call and filter enforces the time budget set by time_budget().
The clock check is one monotonic() read per loop iteration or call, not a trace function.
"""

from __future__ import annotations

import copy
import re
import time
from collections import deque
from collections.abc import Iterator, MappingView
from contextlib import contextmanager
from contextvars import ContextVar
from functools import wraps

from flask_babel import format_number, gettext
from jinja2 import Undefined, nodes
from jinja2.compiler import CodeGenerator
from jinja2.runtime import markup_join, str_join
from jinja2.sandbox import (
    ImmutableSandboxedEnvironment,
    SandboxedEscapeFormatter,
    SandboxedFormatter,
    SecurityError,
)
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


def _limit(size: int, what: str) -> None:
    if size > MAX_SIZE:
        raise TemplateLimitError(
            gettext(
                "%(what)s would be %(size)s characters or items; the limit is %(limit)s",
                what=what,
                size=format_number(size),
                limit=format_number(MAX_SIZE),
            )
        )


def _int_bits(value: int) -> None:
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
        _int_bits(value)
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
            _limit(total, "a value")
            continue
        total += depth * (len(children) + 1)
        _limit(total, "a value")
        for child in children:  # strings and numbers inline: flat lists cost one pass
            kind = type(child)
            if kind is str or kind is Markup:
                total += len(child)
            elif kind is int:
                _int_bits(child)
                total += 1
            elif isinstance(child, _FLAT):
                total += 1
            else:
                stack.append((child, depth + 1))
        _limit(total, "a value")
    return total


def _leaf_weight(item) -> int:
    if isinstance(item, str | bytes):
        return len(item)
    if isinstance(item, int):
        _int_bits(item)
    return 1


def check_size(value):
    """Return value, or raise when it is larger than the sandbox allows (also the output finalizer)."""
    if type(value) is not str or len(value) > MAX_SIZE:  # the common case costs one type check
        weight(value)
    return value


# printf-style specs: %[(key)][flags][width][.precision][length]type
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d*))?[hlL]?([a-zA-Z%])")
_DIGITS = re.compile(r"\d+")


def _width(number: str) -> int:
    if len(number) > 6 or int(number) > MAX_WIDTH:
        raise TemplateLimitError(
            gettext(
                "a format width or precision of %(number)s is over the limit of %(limit)s",
                number=number,
                limit=format_number(MAX_WIDTH),
            )
        )
    return int(number)


def _check_printf(fmt, args) -> None:
    """Bound `fmt % args` before Python builds it: every width and precision, and the result size."""
    if not isinstance(fmt, str):
        return
    estimate, args_size = len(fmt), weight(args)
    for width, precision, _kind in _PRINTF.findall(fmt):
        if "*" in (width, precision):
            raise TemplateLimitError("'*' widths in % formats are not supported in templates")
        estimate += max(_width(width) if width else 0, _width(precision) if precision else 0) + args_size + 32
    _limit(estimate, "the formatted string")


class _BoundedFormatter(SandboxedFormatter):
    """str.format in the sandbox, with bounded widths and a bounded result."""

    def __init__(self, env, **kwargs) -> None:
        super().__init__(env, **kwargs)
        self._size = 0

    def format_field(self, value, format_spec: str):
        for number in _DIGITS.findall(format_spec):
            _width(number)
        check_size(value)
        result = super().format_field(value, format_spec)
        self._size += len(result)
        _limit(self._size, "the formatted string")
        return result


class _BoundedEscapeFormatter(_BoundedFormatter, SandboxedEscapeFormatter):
    """The same for Markup.format (values escaped)."""


# Binary operators whose result can be far larger than their operands.
def _check_binop(operator: str, left, right) -> None:
    if operator == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            if right * max(1, abs(left).bit_length() - 1) > MAX_INT_BITS:
                raise TemplateLimitError(
                    gettext("a number would have more than %(bits)s bits", bits=format_number(MAX_INT_BITS))
                )
    elif operator == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, str | bytes | list | tuple) and isinstance(times, int) and times > 0:
                _limit(len(seq) * times, "the repeated value")
        if isinstance(left, int) and isinstance(right, int):
            if left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
                raise TemplateLimitError(
                    gettext("a number would have more than %(bits)s bits", bits=format_number(MAX_INT_BITS))
                )
    elif operator == "+":
        if isinstance(left, str | bytes | list | tuple) and isinstance(right, str | bytes | list | tuple):
            _limit(len(left) + len(right), "the joined value")
    elif operator == "%":
        _check_printf(left, right)


# str and bytes methods whose result can be far larger than the string they are called on.
def _arg(args: tuple, kwargs: dict, index: int, name: str, default=None):
    return args[index] if len(args) > index else kwargs.get(name, default)


def _replace_size(s, old, new, count) -> int:
    found = s.count(old) if old else len(s) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(s) + found * max(0, len(new) - len(old))


def _check_method(owner, name: str, args: tuple, kwargs: dict) -> tuple:
    """Check a str/bytes method call before it runs; returns the args to call it with."""
    if name in ("ljust", "rjust", "center", "zfill"):
        width = _arg(args, kwargs, 0, "width", 0)
        if isinstance(width, int):
            _limit(width, f"{name}()")
    elif name == "expandtabs":
        size = _arg(args, kwargs, 0, "tabsize", 8)
        if isinstance(size, int):
            _limit(len(owner) + owner.count("\t" if isinstance(owner, str) else b"\t") * size, "expandtabs()")
    elif name == "replace" and len(args) >= 2:
        old, new = args[0], args[1]
        if isinstance(old, type(owner)) and isinstance(new, type(owner)):
            _limit(_replace_size(owner, old, new, _arg(args, kwargs, 2, "count", -1)), "replace()")
    elif name == "join" and args:
        items = args[0] if isinstance(args[0], list | tuple) else list(args[0])
        sizes = sum(len(item) for item in items if isinstance(item, str | bytes))
        _limit(len(owner) * len(items) + sizes, "join()")
        args = (items, *args[1:])
    elif name == "translate" and args and isinstance(args[0], dict):
        longest = max((len(v) for v in args[0].values() if isinstance(v, str | bytes)), default=1)
        _limit(len(owner) * max(longest, 1), "translate()")
    return args


class _TickingCodeGenerator(CodeGenerator):
    """Compiles a time-budget check into the top of every loop body and bounds the `~` operator."""

    def visit_For(self, node: nodes.For, frame) -> None:
        ticking = copy.copy(node)  # Jinja allows no custom node types: the check is an ExprStmt we recognize
        ticking.body = [nodes.ExprStmt(nodes.EnvironmentAttribute(_TICK), lineno=node.lineno), *node.body]
        super().visit_For(ticking, frame)

    def visit_ExprStmt(self, node: nodes.ExprStmt, frame) -> None:
        if isinstance(node.node, nodes.EnvironmentAttribute) and node.node.name == _TICK:
            self.writeline(f"environment.{_TICK}()", node)
            return
        super().visit_ExprStmt(node, frame)

    def visit_Concat(self, node: nodes.Concat, frame) -> None:
        self.write("environment.join_bounded((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("), context.eval_ctx.autoescape)")


_TICK = "tick"


def _bounded_concat(parts) -> str:
    """Join rendered output (the whole template, macros, blocks) and stop as soon as it is too large."""
    kept, size = [], 0
    keep = kept.append
    for part in parts:
        size += len(part)
        if size > MAX_SIZE:
            _limit(size, "the rendered output")
        keep(part)
    return "".join(kept)


# Jinja passes the loop's and block's variables to calls made inside them; Context.call drops them.
_INTERNAL_KWARGS = frozenset({"_loop_vars", "_block_vars"})


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with bounded sizes, numbers, widths and time (see the module docstring)."""

    code_generator_class = _TickingCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})
    concat = staticmethod(_bounded_concat)
    tick = staticmethod(tick)

    def __init__(self, **options) -> None:
        super().__init__(finalize=check_size, **options)
        del self.globals["lipsum"]  # lipsum(10**7) is a megabyte generator with no use in a message
        self.filters.update(_bounded_filters(self.filters))
        self.filters = {name: _checked_filter(func) for name, func in self.filters.items()}

    def unsafe_undefined(self, obj, attribute):
        # Raise at once instead of rendering an empty Undefined: every escape attempt is an error.
        raise SecurityError(
            gettext(
                "access to attribute %(attribute)s of %(type)s object is unsafe",
                attribute=repr(attribute),
                type=repr(type(obj).__name__),
            )
        )

    def call_binop(self, context, operator: str, left, right):
        _check_binop(operator, left, right)
        return check_size(self.binop_table[operator](left, right))

    def call(self, context, obj, /, *args, **kwargs):
        tick()
        for value in args:
            check_size(value)
        for name, value in kwargs.items():
            if name not in _INTERNAL_KWARGS:
                check_size(value)
        owner = getattr(obj, "__self__", None)
        if isinstance(owner, str | bytes):
            args = _check_method(owner, getattr(obj, "__name__", ""), args, kwargs)
        return check_size(super().call(context, obj, *args, **kwargs))

    def wrap_str_format(self, value):
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        owner, is_map = value.__self__, value.__name__ == "format_map"
        formatter_class = _BoundedEscapeFormatter if isinstance(owner, Markup) else _BoundedFormatter

        def bounded_format(*args, **kwargs):
            tick()
            _limit(len(owner), "the format string")
            formatter = (
                formatter_class(self, escape=owner.escape) if isinstance(owner, Markup) else formatter_class(self)
            )
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                args, kwargs = (), args[0]
            return type(owner)(formatter.vformat(owner, args, kwargs))

        return bounded_format

    @staticmethod
    def join_bounded(items: tuple, autoescape: bool) -> str:
        """The `~` operator, refusing a result larger than MAX_SIZE before it is built."""
        _limit(sum(weight(item) for item in items), "the joined string")
        return markup_join(items) if autoescape else str_join(items)


def _checked_filter(func):
    """Wrap a filter: a clock check, its arguments' sizes before the call, the result's size after."""

    @wraps(func)  # keeps jinja_pass_arg (context / eval_ctx / environment first)
    def checked(*args, **kwargs):
        tick()
        for value in (*args, *kwargs.values()):
            check_size(value)
        return check_size(func(*args, **kwargs))

    return checked


def _bounded_filters(filters: dict) -> dict:
    """Replacements for the filters whose result can be far larger than their arguments."""
    center, indent, fmt, join, replace = (filters[n] for n in ("center", "indent", "format", "join", "replace"))
    wordwrap, total, batch, slice_, tojson, urlize = (
        filters[n] for n in ("wordwrap", "sum", "batch", "slice", "tojson", "urlize")
    )

    def do_center(value, width=80):
        if isinstance(width, int):
            _limit(width, "center()")
        return center(value, width)

    def do_indent(s, width=4, first=False, blank=False):
        size = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        text = str(s)
        _limit(len(text) + (text.count("\n") + 1) * size, "indent()")
        return indent(s, width, first, blank)

    def do_format(value, *args, **kwargs):
        _check_printf(str(value), kwargs or args)
        return fmt(value, *args, **kwargs)

    def do_join(eval_ctx, value, d="", attribute=None):
        items = list(value)
        _limit(len(str(d)) * len(items) + weight(items), "join")
        return join(eval_ctx, items, d, attribute)

    def do_replace(eval_ctx, s, old, new, count=None):
        _limit(_replace_size(str(s), str(old), str(new), count), "replace")
        return replace(eval_ctx, s, old, new, count)

    def do_wordwrap(environment, s, width=79, break_long_words=True, wrapstring=None, break_on_hyphens=True):
        separator = environment.newline_sequence if wrapstring is None else str(wrapstring)
        _limit(len(str(s)) * (1 + len(separator)) + len(separator), "wordwrap")
        return wordwrap(environment, s, width, break_long_words, wrapstring, break_on_hyphens)

    def do_sum(environment, iterable, attribute=None, start=0):
        items = list(iterable)
        if not isinstance(start, int | float):  # summing sequences concatenates them
            _limit(weight(start) + weight(items), "sum")
        return total(environment, items, attribute, start)

    def do_batch(value, linecount, fill_with=None):
        if isinstance(linecount, int):
            _limit(linecount, "batch")
        return batch(value, linecount, fill_with)

    def do_slice(value, slices, fill_with=None):
        if isinstance(slices, int):
            _limit(slices, "slice")
        return slice_(value, slices, fill_with)

    def do_tojson(eval_ctx, value, indent=None):
        size = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
        if size > MAX_INDENT:
            raise TemplateLimitError(gettext("tojson's indent is limited to %(max)s", max=MAX_INDENT))
        _limit(weight(value) * (2 + size), "tojson")
        return tojson(eval_ctx, value, indent)

    def do_urlize(eval_ctx, value, *args, **kwargs):
        extra = sum(weight(v) for v in (*args, *kwargs.values()) if isinstance(v, str | list | tuple))
        text = str(value)
        _limit(3 * len(text) + (len(text) // 4 + 1) * (64 + extra), "urlize")
        return urlize(eval_ctx, value, *args, **kwargs)

    replacements = {
        "center": do_center,
        "indent": do_indent,
        "format": do_format,
        "join": do_join,
        "replace": do_replace,
        "wordwrap": do_wordwrap,
        "sum": do_sum,
        "batch": do_batch,
        "slice": do_slice,
        "tojson": do_tojson,
        "urlize": do_urlize,
    }
    for name, func in replacements.items():  # the same first argument as the filter they replace
        if hasattr(filters[name], "jinja_pass_arg"):
            func.jinja_pass_arg = filters[name].jinja_pass_arg
    return replacements


def make_environment(*, html: bool) -> BoundedSandbox:
    """The one factory for operator-template environments: HTML autoescapes, subject and text do not."""
    if html:
        return BoundedSandbox(autoescape=True, undefined=Undefined)
    return BoundedSandbox(autoescape=False, undefined=Undefined, keep_trailing_newline=True)
