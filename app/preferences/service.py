"""Preference writes: store only deviations from a type's default, the user's quiet hours, unmuting.

Functions validate, change rows through the session and flush; they never commit. Bad input raises
an error whose message is shown to the user, before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import time

import sqlalchemy as sa

from app import timezones
from app.extensions import db
from app.models import CHANNELS, User
from app.preferences import queries


class PreferenceError(ValueError):
    """A preference change that cannot be made; the message says why."""


class MandatoryTypeError(PreferenceError):
    """The type is mandatory: nobody may change its channels."""


DELETE_SQL = sa.text(
    "DELETE FROM notification_preferences WHERE user_id = :user_id AND type = :type AND channel = :channel"
)

UPSERT_SQL = sa.text(
    """
INSERT INTO notification_preferences (user_id, type, channel, enabled)
VALUES (:user_id, :type, :channel, :enabled)
ON CONFLICT (user_id, type, channel) DO UPDATE SET enabled = EXCLUDED.enabled
"""
)


def set_preference(user_id: int, type_: str, channel: str, enabled: bool) -> None:
    """Make (type, channel) enabled/disabled for the user; a value equal to the default deletes the row."""
    if channel not in CHANNELS:
        raise PreferenceError(f"Unknown channel {channel!r}: use one of {', '.join(CHANNELS)}.")
    kind = queries.notification_type(type_)
    if kind is None:
        raise PreferenceError(f"There is no notification type called {type_!r}.")
    if kind["mandatory"]:
        raise MandatoryTypeError(f"“{kind['label']}” notifications are required and cannot be changed.")
    params = {"user_id": user_id, "type": type_, "channel": channel}
    if enabled == kind[f"default_{channel}"]:
        db.session.execute(DELETE_SQL, params)
    else:
        db.session.execute(UPSERT_SQL, {**params, "enabled": enabled})


class ScheduleError(ValueError):
    """The time zone or quiet hours are not valid; errors maps each field to its message."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(errors.values()))
        self.errors = errors


@dataclass(frozen=True)
class Schedule:
    """A user's time zone and quiet hours (both ends set, or neither)."""

    timezone: str
    quiet_start: time | None
    quiet_end: time | None


def _parse_time(text: str) -> time | None:
    try:
        parsed = time.fromisoformat(text.strip())
    except ValueError:
        return None
    # Quiet hours are wall-clock times in the user's zone; a fixed UTC shift here would contradict it.
    return parsed.replace(second=0, microsecond=0) if parsed.tzinfo is None else None


def parse_schedule(timezone: str, quiet: bool, start_text: str, end_text: str) -> Schedule:
    """Validate the form's values; raise ScheduleError naming every bad field."""
    errors: dict[str, str] = {}
    if timezone not in timezones.choices():
        errors["timezone"] = "Choose a time zone from the list."
    start = end = None
    if quiet:
        start, end = _parse_time(start_text), _parse_time(end_text)
        if start is None or end is None:
            errors["quiet"] = "Give both a start and an end time, like 22:00 and 07:00."
        elif start == end:
            errors["quiet"] = "Quiet hours must start and end at different times."
    if errors:
        raise ScheduleError(errors)
    return Schedule(timezone, start, end)


def set_schedule(user_id: int, schedule: Schedule) -> None:
    """Store the user's time zone and quiet hours (the delivery workers read them)."""
    user = db.session.get(User, user_id)
    user.timezone = schedule.timezone
    user.quiet_hours_start = schedule.quiet_start
    user.quiet_hours_end = schedule.quiet_end
    db.session.flush()


UNMUTE_SQL = sa.text("DELETE FROM notification_mutes WHERE user_id = :user_id AND group_key = :group_key")


def unmute(user_id: int, group_key: str) -> int:
    """Unmute one of the user's threads; 0 if the user had not muted it. Later notifications arrive as usual."""
    return db.session.execute(UNMUTE_SQL, {"user_id": user_id, "group_key": group_key}).rowcount
