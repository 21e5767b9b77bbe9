"""A member's chat accounts (channel data per chat provider): read, set, unlink, and invalidate."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from flask_babel import gettext

from app.extensions import db
from app.providers.chatfanout import ChatWebhookPolicy
from app.providers.endpoints import EndpointRefused

# What each provider's channel data holds: the fields it takes (exactly one of them).
FIELDS = {"slack": ("channel", "webhook_url"), "msteams": ("webhook_url",), "discord": ("webhook_url",),
          "line": ("user_id",)}  # fmt: skip

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

# The usable accounts of a batch's members (the chat channel's targets): one statement per batch.
USABLE_SQL = sa.text(
    """
SELECT user_id, provider, data FROM chat_accounts
WHERE user_id = ANY(CAST(:user_ids AS bigint[])) AND invalidated_at IS NULL
ORDER BY user_id, provider
"""
)

DATA_SQL = sa.text("SELECT data FROM chat_accounts WHERE user_id = :user_id AND provider = :provider")

DELETE_SQL = sa.text("DELETE FROM chat_accounts WHERE user_id = :user_id AND provider = :provider")

# Only while the data is still the one that was refused (the product may have replaced it meanwhile).
INVALIDATE_SQL = sa.text(
    """
UPDATE chat_accounts SET invalidated_at = now(), invalid_reason = :reason
WHERE user_id = :user_id AND provider = :provider AND data = CAST(:data AS jsonb) AND invalidated_at IS NULL
"""
)


class ChannelDataRefused(Exception):
    """Channel data this installation will not store: the field at fault and why (in the reader's language)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def check_channel_data(provider: str, data: dict, config) -> dict:
    """The channel data to store for provider (only its own field), or ChannelDataRefused naming the field.

    A webhook URL must pass the rule its posts will pass (app/providers/chatfanout.py ChatWebhookPolicy: https on
    the standard port, a host of CHAT_ALLOWED_HOSTS, no literal private address); a Slack channel needs the
    installation's bot token, a LINE user id its channel access token.
    """
    taken = FIELDS[provider]
    given = {name: value for name, value in data.items() if value is not None}
    for name in given:
        if name not in taken:
            raise ChannelDataRefused(name, gettext("%(provider)s channel data takes %(fields)s",
                                                   provider=provider, fields=", ".join(taken)))  # fmt: skip
    if len(given) != 1:
        raise ChannelDataRefused(taken[0], gettext("send exactly one of %(fields)s", fields=", ".join(taken)))
    if "webhook_url" in given:
        try:
            ChatWebhookPolicy.from_config(config).check_url(given["webhook_url"])
        except EndpointRefused as exc:
            raise ChannelDataRefused("webhook_url", str(exc)) from None
    if "channel" in given and not config["SLACK_BOT_TOKEN"]:
        raise ChannelDataRefused("channel", gettext("this server has no Slack bot token (SLACK_BOT_TOKEN): send "
                                                    "a webhook_url instead"))  # fmt: skip
    if "user_id" in given and not config["LINE_CHANNEL_ACCESS_TOKEN"]:
        raise ChannelDataRefused("user_id", gettext("this server has no LINE channel access token "
                                                    "(LINE_CHANNEL_ACCESS_TOKEN)"))  # fmt: skip
    return given


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


def usable_accounts(user_ids) -> dict[int, list[tuple[str, dict]]]:
    """The accounts not invalidated of each of these members: user id -> [(provider, data)], by provider."""
    found: dict[int, list[tuple[str, dict]]] = {}
    for row in db.session.execute(USABLE_SQL, {"user_ids": sorted(user_ids)}):
        found.setdefault(row.user_id, []).append((row.provider, row.data))
    return found


def invalidate_matching(conn, user_id: int, provider: str, matches, reason: str) -> bool:
    """Invalidate the member's account for provider when matches(its data) (the one a provider refused), on conn.

    The refusal names the account by a key without its secret (a webhook by a digest); the data still stored is
    compared with it here, so an account the product replaced since is left alone. Whether one was invalidated.
    """
    row = conn.execute(DATA_SQL, {"user_id": user_id, "provider": provider}).first()
    if row is None or not matches(row.data):
        return False
    invalidate(conn, user_id, provider, row.data, reason)
    return True
