"""Building SQL text safely: search patterns whose wildcards come only from us."""

from __future__ import annotations


def like_prefix(text: str) -> str:
    """Return text as a LIKE prefix pattern with its wildcards escaped (use with ESCAPE '\\')."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
