"""Device writes: register (or refresh, or move) a phone, remove it, turn it off, and what push services said.

A token is one phone's. When another member registers it (the phone changed hands, or the account
did), it moves to them: registrations of one token are serialised by an advisory lock on it, so two
members never both hold it, though the table is keyed by user (docs/scaling.md). Registering again
refreshes last_seen_at and clears an invalidation (the push service's verdict is older than the
registration); a phone the member turned off stays off. One member keeps at most DEVICES_MAX_PER_USER
phones: beyond it, the ones the push service refused go first, then the least recently seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import sqlalchemy as sa
from flask import current_app

from app.extensions import db

# One token's registrations one at a time (it may move between users, whose rows live apart).
LOCK_TOKEN_SQL = sa.text("SELECT pg_advisory_xact_lock(hashtextextended('device:' || :platform || ':' || :token, 0))")
# One user's registrations one at a time, so two at once cannot both keep the user under the cap. NO KEY
# UPDATE: inserts elsewhere that reference the user (their FK check) are not held up.
LOCK_USER_SQL = sa.text("SELECT 1 FROM users WHERE id = :user_id FOR NO KEY UPDATE")

MOVE_SQL = sa.text(
    "DELETE FROM devices WHERE platform = :platform AND token = :token AND user_id <> :user_id RETURNING user_id"
)

# Fields left out keep their value; a new registration clears the push service's older verdict.
UPSERT_SQL = sa.text(
    """
INSERT INTO devices (user_id, platform, token, app_id, app_version, locale, timezone)
VALUES (:user_id, :platform, :token, :app_id, :app_version, :locale, :timezone)
ON CONFLICT (user_id, platform, token) DO UPDATE
SET app_id = coalesce(EXCLUDED.app_id, devices.app_id),
    app_version = coalesce(EXCLUDED.app_version, devices.app_version),
    locale = coalesce(EXCLUDED.locale, devices.locale),
    timezone = coalesce(EXCLUDED.timezone, devices.timezone),
    last_seen_at = now(), invalidated_at = NULL, invalid_reason = NULL
RETURNING id, (xmax = 0) AS created
"""
)

# Beyond the cap, the refused phones go first, then the least recently seen (ranked as the push cap ranks a
# member's browsers, app/push/service.py).
TRIM_SQL = sa.text(
    """
DELETE FROM devices WHERE id IN (
  SELECT id FROM (
    SELECT id, row_number() OVER (ORDER BY invalidated_at IS NULL DESC, last_seen_at DESC, id DESC) AS rank
    FROM devices WHERE user_id = :user_id
  ) ranked
  WHERE rank > :keep
)
"""
)

# APNs tokens are kept in lower case (case-insensitive hex); FCM tokens are case-sensitive.
REMOVE_BY_ID_SQL = {
    "phone": sa.text("DELETE FROM devices WHERE user_id = :user_id AND id = :id"),
    "browser": sa.text("DELETE FROM push_subscriptions WHERE user_id = :user_id AND id = :id"),
}

SWITCH_BY_ID_SQL = {
    table_kind: sa.text(
        f"""
UPDATE {table} SET disabled_at = CASE WHEN :enabled THEN NULL ELSE coalesce(disabled_at, now()) END
WHERE user_id = :user_id AND id = :id
RETURNING id
"""
    )
    for table_kind, table in (("phone", "devices"), ("browser", "push_subscriptions"))
}

REMOVE_SQL = sa.text(
    "DELETE FROM devices WHERE user_id = :user_id AND (token = :token OR (platform = 'ios' AND token = lower(:token)))"
)

# A verdict older than the phone's latest registration is about a token the app has since registered again.
INVALIDATE_SQL = sa.text(
    """
UPDATE devices SET invalidated_at = now(), invalid_reason = :reason
WHERE user_id = :user_id AND token = :token AND invalidated_at IS NULL
  AND (CAST(:since AS double precision) IS NULL OR last_seen_at < to_timestamp(CAST(:since AS double precision)))
"""
)

SENT_SQL = sa.text(
    "UPDATE devices SET last_sent_at = now() WHERE user_id = :user_id AND token = ANY(CAST(:tokens AS text[]))"
)

# A batch's phones that took a push: (user_id, token) pairs, each an index probe of devices_user_token.
STAMP_SENT_SQL = sa.text(
    """
UPDATE devices d SET last_sent_at = now()
FROM unnest(CAST(:user_ids AS bigint[]), CAST(:tokens AS text[])) AS s(user_id, token)
WHERE d.user_id = s.user_id AND d.token = s.token
"""
)


@dataclass(frozen=True)
class Registered:
    """The outcome of a registration: the device's id, whether it is new to this user, who it moved from."""

    device_id: int
    created: bool
    moved_from: tuple[int, ...] = ()


def register(user_id: int, fields: Mapping) -> Registered:
    """Register or refresh the phone of fields (platform, token, and optional app_id, app_version, locale,
    timezone) for user_id, taking it from any other user; trim the user's phones to the cap."""
    params = {"user_id": user_id, "app_id": None, "app_version": None, "locale": None, "timezone": None}
    params.update({key: value for key, value in fields.items() if value is not None})
    db.session.execute(LOCK_TOKEN_SQL, params)
    db.session.execute(LOCK_USER_SQL, params)
    moved = tuple(db.session.execute(MOVE_SQL, params).scalars())
    row = db.session.execute(UPSERT_SQL, params).one()
    db.session.execute(TRIM_SQL, {"user_id": user_id, "keep": int(current_app.config["DEVICES_MAX_PER_USER"])})
    return Registered(row.id, bool(row.created), moved)


def remove(user_id: int, token: str) -> bool:
    """Forget the user's phone with this token; False when the user has none."""
    return db.session.execute(REMOVE_SQL, {"user_id": user_id, "token": token}).rowcount > 0


def set_enabled(user_id: int, device_id: int, enabled: bool, kind: str = "phone") -> bool:
    """Turn pushes to the user's phone (or, kind browser, Web Push subscription) on or off; False when the
    user has no such one."""
    params = {"user_id": user_id, "id": device_id, "enabled": enabled}
    return db.session.execute(SWITCH_BY_ID_SQL[kind], params).first() is not None


def remove_by_id(user_id: int, receiver_id: int, kind: str) -> bool:
    """Forget the user's phone (or, kind browser, Web Push subscription) with this id; False when there is none."""
    return db.session.execute(REMOVE_BY_ID_SQL[kind], {"user_id": user_id, "id": receiver_id}).rowcount > 0


def record_outcome(conn, user_id: int, reached: Iterable[str], gone: Iterable[tuple[str, str, float | None]]) -> None:
    """Stamp the user's phones that took a push; invalidate those the push service refused for good, on conn.

    gone holds (token, reason, since): since (epoch seconds, APNs' 410 timestamp) or None.
    """
    reached = sorted(set(reached))
    if reached:
        conn.execute(SENT_SQL, {"user_id": user_id, "tokens": reached})
    for token, reason, since in gone:
        conn.execute(INVALIDATE_SQL, {"user_id": user_id, "token": token, "reason": reason, "since": since})


def stamp_sent(conn, phones: Iterable[tuple[int, str]]) -> None:
    """Stamp last_sent_at on the phones (user id, token) that took a push, in one statement on conn."""
    pairs = sorted(set(phones))
    if pairs:
        conn.execute(STAMP_SENT_SQL, {"user_ids": [p[0] for p in pairs], "tokens": [p[1] for p in pairs]})
