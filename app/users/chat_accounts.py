"""A member's chat accounts (channel data per chat provider): read, set, unlink, and invalidate."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from app.extensions import db

LIST_SQL = sa.text(
    """
SELECT provider, data, created_at, updated_at, invalidated_at, invalid_reason
FROM chat_accounts WHERE user_id = :user_id ORDER BY provider
"""
)

# Setting it again clears an invalidation: the product (or member) has given a new place to write to.
PUT_SQL = sa.text(
    """
INSERT INTO chat_accounts (user_id, provider, data)
VALUES (:user_id, :provider, CAST(:data AS jsonb))
ON CONFLICT (user_id, provider) DO UPDATE
SET data = EXCLUDED.data, updated_at = now(), invalidated_at = NULL, invalid_reason = NULL
RETURNING provider, data, created_at, updated_at, invalidated_at, invalid_reason
"""
)

DELETE_SQL = sa.text("DELETE FROM chat_accounts WHERE user_id = :user_id AND provider = :provider")

# Only while the data is still the one that was refused (the product may have replaced it meanwhile).
INVALIDATE_SQL = sa.text(
    """
UPDATE chat_accounts SET invalidated_at = now(), invalid_reason = :reason
WHERE user_id = :user_id AND provider = :provider AND data = CAST(:data AS jsonb) AND invalidated_at IS NULL
"""
)


@dataclass(frozen=True)
class ChatAccountRow:
    """One chat account as the API and the preferences page show it."""

    provider: str
    data: dict
    created_at: datetime
    updated_at: datetime
    invalidated_at: datetime | None
    invalid_reason: str | None


def accounts_of(user_id: int) -> list[ChatAccountRow]:
    """The member's chat accounts, by provider name."""
    return [ChatAccountRow(**row._mapping) for row in db.session.execute(LIST_SQL, {"user_id": user_id})]


def account_of(user_id: int, provider: str) -> ChatAccountRow | None:
    """The member's account for provider, or None."""
    return next((a for a in accounts_of(user_id) if a.provider == provider), None)


def put_account(user_id: int, provider: str, data: dict) -> ChatAccountRow:
    """Set (or replace) the member's channel data for provider, in the caller's transaction."""
    row = db.session.execute(PUT_SQL, {"user_id": user_id, "provider": provider, "data": json.dumps(data)}).one()
    return ChatAccountRow(**row._mapping)


def delete_account(user_id: int, provider: str) -> bool:
    """Unlink the member's account for provider; whether there was one (caller's transaction)."""
    return db.session.execute(DELETE_SQL, {"user_id": user_id, "provider": provider}).rowcount > 0


def invalidate(conn, user_id: int, provider: str, data: dict, reason: str) -> None:
    """A provider refused this channel data for good: no chat goes to it until it is set again (on conn)."""
    conn.execute(INVALIDATE_SQL, {"user_id": user_id, "provider": provider, "data": json.dumps(data),
                                  "reason": reason[:300]})  # fmt: skip
