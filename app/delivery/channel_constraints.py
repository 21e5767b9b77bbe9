"""The database's channel check constraints, derived from the channel registry (app/delivery/channels).

A channel is declared once, by its module; the tables that hold channel names still refuse a name no
module declares. Migrations cannot know which channel modules a deployment has, so every
`flask --app wsgi db upgrade` ends by calling sync() (migrations/env.py), which makes each constraint
below admit exactly the registry's channels: it leaves a matching constraint alone and replaces one that
differs. A channel module removed while rows still name it leaves the new constraint NOT VALID (old rows
kept, new ones checked) and says so in the log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable

import sqlalchemy as sa

from app.delivery.channels import member_channels, routable_names, template_channels

log = logging.getLogger(__name__)


def _members() -> list[str]:
    return [c.name for c in member_channels()]


def _templates() -> list[str]:
    return [c.name for c in template_channels()]


def _routable() -> list[str]:
    return list(routable_names())


ONE = "channel = ANY (ARRAY[{names}]::text[])"
# (table, constraint name, the channels it admits, the check with {names} for the quoted list)
CONSTRAINTS: tuple[tuple[str, str, Callable[[], list[str]], str], ...] = (
    ("notification_preferences", "notification_preferences_channel", _members, ONE),
    ("tenant_preferences", "tenant_preferences_channel", _members, ONE),
    ("message_templates", "message_templates_channel", _templates, ONE),
    ("notification_deliveries", "notification_deliveries_channel", _routable, ONE),
    ("notification_types", "notification_types_channels", _routable, "channels <@ ARRAY[{names}]::text[]"),
    ("notification_types", "notification_types_default_channels", _members,
     "default_channels <@ ARRAY[{names}]::text[]"),
    ("scheduled_notifications", "scheduled_notifications_channels", _routable, "channels <@ ARRAY[{names}]::text[]"),
)  # fmt: skip

DEFINITION_SQL = sa.text("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = :name")
_NAME = re.compile(r"'([^']*)'")


def admitted(definition: str | None) -> set[str] | None:
    """The channel names a constraint's definition lists (None when there is no constraint)."""
    return None if definition is None else set(_NAME.findall(definition))


def _quoted(names: Iterable[str]) -> str:
    return ", ".join("'" + name.replace("'", "''") + "'" for name in names)


def sync(connection) -> list[str]:
    """Make every channel constraint admit exactly the registry's channels; return the ones replaced."""
    replaced = []
    for table, name, channels, check in CONSTRAINTS:
        wanted = channels()
        current = admitted(connection.execute(DEFINITION_SQL, {"name": name}).scalar())
        if current == set(wanted):
            continue
        connection.execute(sa.text(f'ALTER TABLE {table} DROP CONSTRAINT IF EXISTS "{name}"'))
        expression = check.format(names=_quoted(wanted))
        connection.execute(sa.text(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" CHECK ({expression}) NOT VALID'))
        try:
            with connection.begin_nested():
                connection.execute(sa.text(f'ALTER TABLE {table} VALIDATE CONSTRAINT "{name}"'))
        except sa.exc.IntegrityError:
            log.warning("%s: rows name a channel no module declares any more; the check holds for new rows only", name)
        replaced.append(name)
    return replaced
