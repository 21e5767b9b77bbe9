"""HTMX requests: a fragment instead of a page, and out-of-band swaps beside it."""

from __future__ import annotations

from flask import request


def is_htmx() -> bool:
    """Whether htmx sent this request (it then wants a fragment, not a whole page)."""
    return request.headers.get("HX-Request") == "true"
