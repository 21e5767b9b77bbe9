"""Preference resolution: the seed article's statement, shared by the screen, the API and the workers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from flask_babel import lazy_gettext

from app.delivery.channels import member_channels
from app.digests.queries import DEFAULT_DIGEST_TIME, frequencies
from app.extensions import db
from app.locales import in_locale
from app.notification_types.builtin import BUILTIN_TYPES
from app.preferences.rules import EFFECTIVE_SEND_SQL, SOURCE_SQL, TYPE_DEFAULT_SQL

RESOLVE_SQL = sa.text(
    f"""
SELECT u.user_id, t.type, c.channel,
       {EFFECTIVE_SEND_SQL} AS send,
       {SOURCE_SQL} AS source,
       {TYPE_DEFAULT_SQL} AS type_default,
       t.mandatory
FROM unnest(CAST(:user_ids AS bigint[])) AS u(user_id)
CROSS JOIN notification_types t
CROSS JOIN unnest(CAST(:channels AS text[])) AS c(channel)
LEFT JOIN notification_preferences p
       ON p.user_id = u.user_id AND p.type = t.type AND p.channel = c.channel
WHERE (CAST(:type AS text) IS NULL OR t.type = CAST(:type AS text))
ORDER BY u.user_id, t.type, c.channel
"""
)


@dataclass(frozen=True)
class Resolved:
    """One (user, type, channel) cell: whether to send and why."""

    user_id: int
    type: str
    channel: str
    send: bool
    source: str  # default | user | mandatory
    type_default: bool
    mandatory: bool


def resolve(user_ids: Iterable[int], type_: str | None = None) -> list[Resolved]:
    """Resolve every (user, type, channel) cell in one statement; type_ narrows to one type."""
    channels = [channel.name for channel in member_channels()]
    rows = db.session.execute(RESOLVE_SQL, {"user_ids": list(user_ids), "type": type_, "channels": channels})
    return [Resolved(*row) for row in rows]


def channels_on(user_ids: Iterable[int], type_: str) -> dict[int, set[str]]:
    """Return, per user, the channels on which type_ should be sent."""
    result: dict[int, set[str]] = {}
    for cell in resolve(user_ids, type_):
        bucket = result.setdefault(cell.user_id, set())
        if cell.send:
            bucket.add(cell.channel)
    return result


# --- the preference screen ------------------------------------------------------------------------

# Why a cell is on or off, as the screen says it (lazy: said in the reader's language when a page renders).
SOURCE_LABELS = {
    "default": lazy_gettext("Default"),
    "user": lazy_gettext("Your choice"),
    "mandatory": lazy_gettext("Required"),
}

TYPES_SQL = sa.text(
    """
SELECT type, label, description, locales, mandatory, default_in_app, default_email, default_push, default_channels,
       email_frequency
FROM notification_types
WHERE (CAST(:type AS text) IS NULL OR type = CAST(:type AS text))
ORDER BY type
"""
)


@dataclass(frozen=True)
class MatrixRow:
    """One notification type on the screen: its label and its resolved cell per channel."""

    type: str
    label: str
    description: str
    mandatory: bool
    cells: dict[str, Resolved]
    locales: dict = field(default_factory=dict)  # the label and description per locale, as stored


TYPE_TEXT = ("label", "description")  # what a type has per locale (its `locales` column)


def notification_type(type_: str, chain: Sequence[str] = ()) -> dict | None:
    """Return one type's label (along chain, see app/locales.py), defaults and mandatory flag, or None if there is no
    such type."""
    row = db.session.execute(TYPES_SQL, {"type": type_}).mappings().first()
    return None if row is None else in_locale(row, TYPE_TEXT, chain)


def matrix(user_id: int, chain: Sequence[str] = ()) -> list[MatrixRow]:
    """Return every type × channel for the user, resolved by resolve() (the statement delivery uses).

    Each type's label and description are in the first locale along chain that has them, else the base text.
    """
    cells: dict[str, dict[str, Resolved]] = {}
    for cell in resolve([user_id]):
        cells.setdefault(cell.type, {})[cell.channel] = cell
    types = [in_locale(t, TYPE_TEXT, chain) for t in db.session.execute(TYPES_SQL, {"type": None}).mappings()]
    # Hato's own types (a phone verification code) are sent on request, not chosen: the matrix leaves them out.
    return [MatrixRow(t["type"], t["label"], t["description"], t["mandatory"], cells[t["type"]], t["locales"])
            for t in types if t["type"] not in BUILTIN_TYPES]  # fmt: skip


def cell(user_id: int, type_: str, channel: str) -> Resolved | None:
    """Return one resolved (type, channel) cell for the user."""
    return next((c for c in resolve([user_id], type_) if c.channel == channel), None)


# --- muted threads --------------------------------------------------------------------------------

MUTES_LIMIT = 200

# The latest visible notification of each thread names it on the screen (a group key alone says little).
MUTES_SQL = sa.text(
    """
SELECT m.group_key, m.created_at,
       (SELECT n.title FROM notifications n
        WHERE n.user_id = m.user_id AND n.group_key = m.group_key AND n.in_app
        ORDER BY n.created_at DESC, n.id DESC LIMIT 1) AS latest_title
FROM notification_mutes m
WHERE m.user_id = :user_id
ORDER BY m.created_at DESC, m.group_key
LIMIT :limit
"""
)


def muted_threads(user_id: int, limit: int = MUTES_LIMIT) -> list:
    """Return the user's muted threads, newest mute first: group key, when muted, latest title (or None)."""
    return list(db.session.execute(MUTES_SQL, {"user_id": user_id, "limit": limit}).mappings())


# --- e-mail frequency (digests) -------------------------------------------------------------------

FREQUENCY_LABELS = {
    "immediate": lazy_gettext("Immediately"),
    "hourly": lazy_gettext("Hourly digest"),
    "daily": lazy_gettext("Daily digest"),
    "off": lazy_gettext("Off"),
}


@dataclass(frozen=True)
class EmailChoice:
    """How one type's e-mail reaches the user: immediate | hourly | daily | off, and the type's default."""

    type: str
    label: str
    mandatory: bool
    choice: str
    default: str


def email_choices(user_id: int, chain: Sequence[str] = ()) -> list[EmailChoice]:
    """Every type's e-mail frequency for the user (labels along chain): off when e-mail is off, mandatory types always
    immediate."""
    freq = frequencies(user_id)
    result = []
    for row in matrix(user_id, chain):
        cell = row.cells["email"]
        effective, type_default = freq[row.type]
        choice = effective if cell.send else "off"
        default = type_default if cell.type_default else "off"
        result.append(EmailChoice(row.type, row.label, row.mandatory, choice, default))
    return result


def digest_time(user) -> str:
    """The user's daily digest time as HH:MM (09:00 when they never chose one)."""
    return (user.digest_time or DEFAULT_DIGEST_TIME).strftime("%H:%M")
