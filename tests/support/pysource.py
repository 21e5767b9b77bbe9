"""Parsing this repository's Python sources, for the tests that read them."""

from __future__ import annotations

import ast

ATTEMPTS = 5


def parse(source: str) -> ast.Module:
    """ast.parse, retried on CPython 3.11's spurious SystemError (python/cpython#106905).

    The AST builder keeps its recursion counter per interpreter, not per call: when another thread parses
    at the same moment (3.11 formats every traceback's carets with ast.parse, and the suite's servers log
    tracebacks in their own threads), ours ends with "AST constructor recursion depth mismatch". The source
    is fine; parsing it again is the whole fix.
    """
    for attempt in range(ATTEMPTS):
        try:
            return ast.parse(source)
        except SystemError:
            if attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")
