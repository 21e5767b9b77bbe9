"""Device reads: a member's phones for the API and the preferences page, the active ones for the push channel."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from app.extensions import db
from app.providers.mobile import DeviceTarget

COLUMNS = """id, platform, token, app_id, app_version, locale, timezone, created_at, last_seen_at, last_sent_at,
disabled_at, invalidated_at, invalid_reason"""

LIST_SQL = sa.text(f"SELECT {COLUMNS} FROM devices WHERE user_id = :user_id ORDER BY last_seen_at DESC, id DESC")

ACTIVE_SQL = sa.text(
    """
SELECT id, user_id, platform, token, app_id, coalesce(locale, '') AS locale
FROM devices
WHERE user_id = ANY(CAST(:user_ids AS bigint[])) AND disabled_at IS NULL AND invalidated_at IS NULL
ORDER BY user_id, id
"""
)


@dataclass(frozen=True)
class DeviceRow:
    """One registered phone as the API and the preferences page show it."""

    id: int
    platform: str
    token: str
    app_id: str | None
    app_version: str | None
    locale: str | None
    timezone: str | None
    created_at: datetime
    last_seen_at: datetime
    last_sent_at: datetime | None
    disabled_at: datetime | None
    invalidated_at: datetime | None
    invalid_reason: str | None

    @property
    def active(self) -> bool:
        """Whether pushes go to it (neither turned off by the member nor refused by the push service)."""
        return self.disabled_at is None and self.invalidated_at is None


def for_user(user_id: int) -> list[DeviceRow]:
    """The member's phones, the most recently seen first."""
    return [DeviceRow(**row._mapping) for row in db.session.execute(LIST_SQL, {"user_id": user_id})]


def active_targets(user_ids: Iterable[int]) -> dict[int, tuple[DeviceTarget, ...]]:
    """Each user's phones that pushes go to, as DeviceTarget (one statement for a batch)."""
    targets: dict[int, list[DeviceTarget]] = {}
    for row in db.session.execute(ACTIVE_SQL, {"user_ids": sorted(set(user_ids))}):
        targets.setdefault(row.user_id, []).append(
            DeviceTarget(row.id, row.platform, row.token, row.app_id, row.locale)
        )
    return {user_id: tuple(devices) for user_id, devices in targets.items()}


# What the preferences page lists: the member's phones and browsers, the most recently seen first.
RECEIVERS_SQL = sa.text(
    """
SELECT 'phone' AS kind, id, platform, app_version, '' AS user_agent, last_seen_at AS seen_at,
       disabled_at IS NULL AS enabled, invalidated_at IS NOT NULL AS refused
FROM devices WHERE user_id = :user_id
UNION ALL
SELECT 'browser', id, NULL, NULL, user_agent, coalesce(last_success_at, created_at),
       disabled_at IS NULL, invalidated_at IS NOT NULL
FROM push_subscriptions WHERE user_id = :user_id
ORDER BY seen_at DESC, kind, id DESC
"""
)

# (needle in the user agent, name shown), the first match wins: Edge and Opera say Chrome too, Chrome says Safari.
BROWSERS = (("Edg/", "Edge"), ("OPR/", "Opera"), ("Firefox/", "Firefox"), ("Chrome/", "Chrome"),
            ("Safari/", "Safari"))  # fmt: skip
SYSTEMS = (("Windows", "Windows"), ("Android", "Android"), ("iPhone", "iOS"), ("iPad", "iPadOS"),
           ("Mac OS X", "macOS"), ("CrOS", "ChromeOS"), ("Linux", "Linux"))  # fmt: skip


@dataclass(frozen=True)
class Receiver:
    """A phone or browser on the preferences page: what it is, when it was last seen, whether pushes go to it."""

    kind: str  # phone | browser
    id: int
    platform: str | None  # ios | android (phones)
    app_version: str | None
    browser: str | None  # from the browser's user agent (None: not recognised)
    system: str | None
    seen_at: datetime
    enabled: bool
    refused: bool  # the push service said it is gone


def _first(user_agent: str, names: tuple[tuple[str, str], ...]) -> str | None:
    return next((name for needle, name in names if needle in user_agent), None)


def receivers(user_id: int) -> list[Receiver]:
    """The member's phones and browsers, the most recently seen first."""
    found = []
    for row in db.session.execute(RECEIVERS_SQL, {"user_id": user_id}):
        agent = row.user_agent or ""
        found.append(Receiver(row.kind, row.id, row.platform, row.app_version, _first(agent, BROWSERS),
                              _first(agent, SYSTEMS), row.seen_at, row.enabled, row.refused))  # fmt: skip
    return found
