"""Snooze times: the menu's choices and a picked date-time, read in the user's time zone and bounded."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from flask_babel import gettext, lazy_gettext

from app import timezones

MAX_DAYS = 90
MORNING = time(9, 0)
# The menu's fixed choices, in the order shown (value sent by the form → label).
CHOICES = {
    "hour": lazy_gettext("Snooze for 1 hour"),
    "tomorrow": lazy_gettext("Until tomorrow 9:00"),
    "monday": lazy_gettext("Until next Monday 9:00"),
}


class SnoozeError(ValueError):
    """A snooze time that cannot be used; the message says why."""


def _morning(day, tz: ZoneInfo) -> datetime:
    # Built as wall-clock time in tz, so 9:00 stays 9:00 across a daylight-saving change.
    return datetime.combine(day, MORNING, tzinfo=tz)


def choice_time(choice: str, now: datetime, tz: ZoneInfo) -> datetime:
    """The instant a menu choice means at `now` in tz; "next Monday" on a Monday is a week ahead."""
    local = now.astimezone(tz)
    if choice == "hour":
        return now + timedelta(hours=1)
    if choice == "tomorrow":
        return _morning(local.date() + timedelta(days=1), tz)
    if choice == "monday":
        return _morning(local.date() + timedelta(days=(7 - local.weekday()) % 7 or 7), tz)
    raise SnoozeError(gettext("Choose how long to snooze."))


def picked_time(text: str | None, now: datetime, tz: ZoneInfo) -> datetime:
    """Read a datetime-local value in tz; refuse a malformed value, the past and more than MAX_DAYS ahead."""
    until = timezones.parse_local(text, tz)
    if until is None:
        raise SnoozeError(gettext("Pick a date and time to snooze until."))
    if until <= now:
        raise SnoozeError(gettext("That time has already passed. Pick a time in the future."))
    if until > now + timedelta(days=MAX_DAYS):
        raise SnoozeError(gettext("You can snooze for at most %(days)d days.", days=MAX_DAYS))
    return until


def until_from_form(form, now: datetime, tz: ZoneInfo) -> datetime:
    """The snooze time a submitted form asks for: a menu choice, or else the picked date-time."""
    choice = form.get("choice")
    return choice_time(choice, now, tz) if choice else picked_time(form.get("until"), now, tz)


def picker_bounds(now: datetime, tz: ZoneInfo) -> tuple[str, str]:
    """min and max for the datetime-local picker, in tz (the server checks again)."""
    local = now.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)
    return (local + timedelta(minutes=1)).strftime(timezones.LOCAL_FORMAT), (local + timedelta(days=MAX_DAYS)).strftime(
        timezones.LOCAL_FORMAT
    )
