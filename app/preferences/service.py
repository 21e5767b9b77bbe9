"""Preference writes: store only deviations from a type's default, e-mail frequency, quiet hours, unmuting.

Functions validate, change rows through the session and flush; they never commit. Bad input raises
an error whose message is shown to the user, before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import time

import sqlalchemy as sa
from flask_babel import gettext

from app import timezones
from app.delivery.channels import member_channels
from app.extensions import db
from app.i18n import LANGUAGES
from app.models import User
from app.preferences import queries
from app.preferences.rules import SEED_DEFAULT_COLUMNS
from app.webhooks import service as webhooks


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
    names = [c.name for c in member_channels()]  # also one not configured yet: it holds once it is
    if channel not in names:
        raise PreferenceError(
            gettext("Unknown channel %(channel)r: use one of %(choices)s.", channel=channel, choices=", ".join(names))
        )
    kind = queries.notification_type(type_)
    if kind is None:
        raise PreferenceError(gettext("There is no notification type called %(type)r.", type=type_))
    if kind["mandatory"]:
        raise MandatoryTypeError(
            gettext("“%(label)s” notifications are required and cannot be changed.", label=kind["label"])
        )
    params = {"user_id": user_id, "type": type_, "channel": channel}
    if enabled == _type_default(kind, channel):
        db.session.execute(DELETE_SQL, params)
    else:
        db.session.execute(UPSERT_SQL, {**params, "enabled": enabled})
    webhooks.emit("preference.updated", {**params, "enabled": enabled})  # in this transaction's outbox


def _type_default(kind, channel: str) -> bool:
    """The type's default for channel: its seed column, or whether default_channels lists it."""
    column = SEED_DEFAULT_COLUMNS.get(channel)
    return bool(kind[column]) if column else channel in (kind["default_channels"] or ())


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
        errors["timezone"] = gettext("Choose a time zone from the list.")
    start = end = None
    if quiet:
        start, end = _parse_time(start_text), _parse_time(end_text)
        if start is None or end is None:
            errors["quiet"] = gettext("Give both a start and an end time, like 22:00 and 07:00.")
        elif start == end:
            errors["quiet"] = gettext("Quiet hours must start and end at different times.")
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


FREQUENCY_CHOICES = ("immediate", "hourly", "daily", "off")

DELETE_FREQUENCY_SQL = sa.text("DELETE FROM digest_preferences WHERE user_id = :user_id AND type = :type")
UPSERT_FREQUENCY_SQL = sa.text(
    """
INSERT INTO digest_preferences (user_id, type, frequency) VALUES (:user_id, :type, :frequency)
ON CONFLICT (user_id, type) DO UPDATE SET frequency = EXCLUDED.frequency
"""
)


def set_email_frequency(user_id: int, type_: str, choice: str) -> None:
    """Send type_'s e-mail immediately, in the hourly or daily digest, or not at all; defaults are not stored."""
    if choice not in FREQUENCY_CHOICES:
        raise PreferenceError(
            gettext(
                "Unknown e-mail frequency %(choice)r: use one of %(choices)s.",
                choice=choice,
                choices=", ".join(FREQUENCY_CHOICES),
            )
        )
    kind = queries.notification_type(type_)
    if kind is None:
        raise PreferenceError(gettext("There is no notification type called %(type)r.", type=type_))
    if kind["mandatory"]:
        raise MandatoryTypeError(
            gettext("“%(label)s” e-mails are required and always sent immediately.", label=kind["label"])
        )
    set_preference(user_id, type_, "email", choice != "off")
    if choice == "off":
        return  # the frequency stays as chosen, for when e-mail is turned back on
    params = {"user_id": user_id, "type": type_}
    if choice == kind["email_frequency"]:
        db.session.execute(DELETE_FREQUENCY_SQL, params)
    else:
        db.session.execute(UPSERT_FREQUENCY_SQL, {**params, "frequency": choice})


def parse_digest_time(text: str) -> time:
    """The daily digest's local time from the form (HH:MM); raise ScheduleError when it is not one."""
    parsed = _parse_time(text or "")
    if parsed is None:
        raise ScheduleError({"digest_time": gettext("Give a time like 09:00.")})
    return parsed


def set_digest_time(user_id: int, at: time) -> None:
    """Store the user's daily digest time; 09:00 (the default) is stored as no choice."""
    user = db.session.get(User, user_id)
    user.digest_time = None if at == queries.DEFAULT_DIGEST_TIME else at
    db.session.flush()


# --- language -------------------------------------------------------------------------------------


def parse_language(text: str | None) -> str | None:
    """The language the form chose: one of LANGUAGES, or None for the browser's (Accept-Language)."""
    value = (text or "").strip().lower()
    if not value:
        return None
    if value not in LANGUAGES:
        raise PreferenceError(gettext("Choose a language from the list."))
    return value


def set_language(user_id: int, language: str | None) -> None:
    """Store the user's language (None: follow the browser); pages, e-mail and live updates use it from now on."""
    user = db.session.get(User, user_id)
    user.locale = language
    db.session.flush()
