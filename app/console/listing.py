"""Reading a console list's search box and filters from the query string.

Every list keeps its filters in the URL (a GET form), so a reload or a shared link shows the same rows,
and its "next page" link carries them. A value outside a filter's choices is ignored and the page says
so (never a guess, never an error page). The search text itself goes to the domain's query module as a
bound parameter; the wildcards of ILIKE patterns are escaped there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import tzinfo

from flask_babel import gettext

from app.timezones import parse_local

SEARCH_MAX = 100  # characters of a search box that reach SQL


class ListArgs:
    """The filters of one list request: the values read, and a message for each value ignored."""

    def __init__(self, args: Mapping) -> None:
        self.args = args
        self.values: dict[str, str] = {}
        self.errors: list[str] = []

    def text(self, name: str, limit: int = SEARCH_MAX) -> str:
        """A free-text value, trimmed and bounded."""
        value = (self.args.get(name) or "")[:limit].strip()
        if value:
            self.values[name] = value
        return value

    def choice(self, name: str, allowed: Iterable[str], label: str) -> str:
        """One of allowed, or "" (with a message) for anything else."""
        value = (self.args.get(name) or "").strip()
        if not value:
            return ""
        if value not in set(allowed):
            self.errors.append(
                gettext("Unknown %(filter)s “%(value)s”: that filter was ignored.", filter=label, value=value[:40])
            )
            return ""
        self.values[name] = value
        return value

    @property
    def active(self) -> bool:
        """Whether any filter narrows the list."""
        return bool(self.values)

    def with_cursor(self, name: str, cursor) -> dict:
        """The URL arguments of the next page: the filters and the cursor."""
        return {**self.values, name: cursor}


def page_args(values: Mapping) -> dict:
    """What a log's next-page link carries: every argument given, but the cursor."""
    return {name: value for name, value in values.items() if name != "cursor" and value}


def time_window(values: Mapping, zone: tzinfo) -> dict:
    """A log's since, until (read in zone) and errors (one per time that is not one): app.filters.Filters' fields."""
    since, until = parse_local(values.get("since"), zone), parse_local(values.get("until"), zone)
    return {"since": since, "until": until, "errors": time_errors(values, zone)}


def checked_choice(values: Mapping, name: str, allowed: Sequence[str], message: str, errors: list[str]) -> str:
    """values[name] when it is one of allowed; "" when empty, or when not (errors then gets the message)."""
    value = (values.get(name) or "").strip()
    if value and value not in allowed:
        errors.append(message)
        return ""
    return value


def channel_choice(values: Mapping, channels: Sequence[str], errors: list[str]) -> str:
    """The channel a log is narrowed to, one of channels; "" when none, or when unknown (errors then says so)."""
    message = gettext("The channel must be one of %(choices)s.", choices=", ".join(channels))
    return checked_choice(values, "channel", channels, message, errors)


def time_errors(values: Mapping, zone: tzinfo) -> list[str]:
    """A message for each time filter (since, until) that is not a date and time."""
    labels = {"since": gettext("From is not a date and time."), "until": gettext("Until is not a date and time.")}
    return [
        labels[name]
        for name in ("since", "until")
        if (values.get(name) or "").strip() and parse_local(values.get(name), zone) is None
    ]
