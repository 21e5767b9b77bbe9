"""The bounded Jinja sandbox for operator templates: limits on sizes, numbers, widths and time.

Jinja's own sandbox stops attribute escapes but lets a template compute `'a' * 10**9`, `9**(9**9)`,
`'x'|center(10**9)` or nested `range(100000)` loops, all before the caller can look at the output.
Here every operation that can grow a value checks its result's size first (the limits and checks are in
app/delivery/template_limits.py), `lipsum` is gone, and a clock check compiled into every loop body,
call and filter enforces the time budget set by time_budget().
The clock check is one monotonic() read per loop iteration or call, not a trace function.
"""

from __future__ import annotations

import copy
from functools import wraps

from flask_babel import gettext
from jinja2 import Undefined, nodes
from jinja2.compiler import CodeGenerator
from jinja2.runtime import markup_join, str_join
from jinja2.sandbox import (
    ImmutableSandboxedEnvironment,
    SandboxedEscapeFormatter,
    SandboxedFormatter,
    SecurityError,
)
from markupsafe import Markup

from app.delivery.template_limits import (
    MAX_INDENT,
    MAX_SIZE,
    WIDTH_DIGITS,
    TemplateLimitError,
    check_binop,
    check_method,
    check_printf,
    check_size,
    check_width,
    limit,
    replace_size,
    tick,
    time_budget,
    weight,
)

__all__ = ["BoundedSandbox", "TemplateLimitError", "make_environment", "time_budget"]


class _BoundedFormatter(SandboxedFormatter):
    """str.format in the sandbox, with bounded widths and a bounded result."""

    def __init__(self, env, **kwargs) -> None:
        super().__init__(env, **kwargs)
        self._size = 0

    def format_field(self, value, format_spec: str):
        for number in WIDTH_DIGITS.findall(format_spec):
            check_width(number)
        check_size(value)
        result = super().format_field(value, format_spec)
        self._size += len(result)
        limit(self._size, "the formatted string")
        return result


class _BoundedEscapeFormatter(_BoundedFormatter, SandboxedEscapeFormatter):
    """The same for Markup.format (values escaped)."""


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
            limit(size, "the rendered output")
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
        check_binop(operator, left, right)
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
            args = check_method(owner, getattr(obj, "__name__", ""), args, kwargs)
        return check_size(super().call(context, obj, *args, **kwargs))

    def wrap_str_format(self, value):
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        owner, is_map = value.__self__, value.__name__ == "format_map"
        formatter_class = _BoundedEscapeFormatter if isinstance(owner, Markup) else _BoundedFormatter

        def bounded_format(*args, **kwargs):
            tick()
            limit(len(owner), "the format string")
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
        limit(sum(weight(item) for item in items), "the joined string")
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
            limit(width, "center()")
        return center(value, width)

    def do_indent(s, width=4, first=False, blank=False):
        size = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        text = str(s)
        limit(len(text) + (text.count("\n") + 1) * size, "indent()")
        return indent(s, width, first, blank)

    def do_format(value, *args, **kwargs):
        check_printf(str(value), kwargs or args)
        return fmt(value, *args, **kwargs)

    def do_join(eval_ctx, value, d="", attribute=None):
        items = list(value)
        limit(len(str(d)) * len(items) + weight(items), "join")
        return join(eval_ctx, items, d, attribute)

    def do_replace(eval_ctx, s, old, new, count=None):
        limit(replace_size(str(s), str(old), str(new), count), "replace")
        return replace(eval_ctx, s, old, new, count)

    def do_wordwrap(environment, s, width=79, break_long_words=True, wrapstring=None, break_on_hyphens=True):
        separator = environment.newline_sequence if wrapstring is None else str(wrapstring)
        limit(len(str(s)) * (1 + len(separator)) + len(separator), "wordwrap")
        return wordwrap(environment, s, width, break_long_words, wrapstring, break_on_hyphens)

    def do_sum(environment, iterable, attribute=None, start=0):
        items = list(iterable)
        if not isinstance(start, int | float):  # summing sequences concatenates them
            limit(weight(start) + weight(items), "sum")
        return total(environment, items, attribute, start)

    def do_batch(value, linecount, fill_with=None):
        if isinstance(linecount, int):
            limit(linecount, "batch")
        return batch(value, linecount, fill_with)

    def do_slice(value, slices, fill_with=None):
        if isinstance(slices, int):
            limit(slices, "slice")
        return slice_(value, slices, fill_with)

    def do_tojson(eval_ctx, value, indent=None):
        size = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
        if size > MAX_INDENT:
            raise TemplateLimitError(gettext("tojson's indent is limited to %(max)s", max=MAX_INDENT))
        limit(weight(value) * (2 + size), "tojson")
        return tojson(eval_ctx, value, indent)

    def do_urlize(eval_ctx, value, *args, **kwargs):
        extra = sum(weight(v) for v in (*args, *kwargs.values()) if isinstance(v, str | list | tuple))
        text = str(value)
        limit(3 * len(text) + (len(text) // 4 + 1) * (64 + extra), "urlize")
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
