"""Time zones, one rule for all: a user's zone name, or the fallback when it is missing or unknown.

Users (and operators) speak their own zone: the inbox shows times in it, quiet hours are wall-clock
times in it, and console forms read `datetime-local` values in the operator's zone. The names a user
may choose are the IANA names of the system's tz database, without its aliases.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

LOCAL_FORMAT = "%Y-%m-%dT%H:%M"  # what <input type="datetime-local"> sends


@lru_cache(maxsize=512)
def zone(name: str | None, default: str = "UTC") -> ZoneInfo:
    """Return the named zone, or the default when the name is empty or unknown."""
    try:
        return ZoneInfo(name or default)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo(default)


def user_zone(user, default: str = "UTC") -> ZoneInfo:
    """The zone of a user (anything with a `timezone` attribute, or None), else the default."""
    return zone(getattr(user, "timezone", None) or default, default)


@lru_cache(maxsize=1)
def choices() -> tuple[str, ...]:
    """The IANA zone names a user may choose (system aliases and duplicates left out), sorted."""
    hidden = {"localtime", "Factory"}  # the host's own zone and tzdata's placeholder
    names = (z for z in available_timezones() if z not in hidden and not z.startswith(("posix/", "right/")))
    return tuple(sorted(names))


def aware(value: datetime | None, tz: ZoneInfo) -> datetime | None:
    """Read a naive datetime-local value as a time in tz."""
    return value.replace(tzinfo=tz) if value is not None else None


def local_value(value: datetime | None, tz: ZoneInfo) -> datetime | None:
    """Turn a stored timestamp into the naive local time a datetime-local input shows."""
    return value.astimezone(tz).replace(tzinfo=None) if value is not None else None


def parse_local(text: str | None, tz: ZoneInfo) -> datetime | None:
    """Parse a datetime-local (or date-only) value in tz; None if blank or malformed."""
    text = (text or "").strip()
    for fmt in (LOCAL_FORMAT, "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=tz)
        except ValueError:
            continue
    return None
