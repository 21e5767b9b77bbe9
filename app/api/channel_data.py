"""The API's chat channel data: PUT, GET and DELETE /v1/users/<external_id>/channel-data/<provider>.

Where a member's chat messages go, per chat provider (app/users/chat_accounts.py stores it; the chat channel,
app/delivery/channels/chat.py, sends to it). app/api/views.py adds ROUTES to the API blueprint, so they share
its key check, rate limit, body limit and problem documents. Webhook URLs are secrets of the member's workspace:
GET gives them back to the product that set them, and nothing here logs them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from flask import current_app
from flask_babel import gettext, lazy_gettext
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from app.api import auth, schemas
from app.api.idempotency import idempotent, json_response, store
from app.api.schemas import ApiError
from app.models.chat import CHAT_PROVIDERS
from app.unitofwork import commit
from app.users import chat_accounts, export
from app.web.bodies import JsonBody, absent_by_default, text
from app.web.documented import documented

SLACK_CHANNEL_PATTERN = r"^[CDGUW][A-Z0-9]{2,29}$"
LINE_USER_PATTERN = r"^U[0-9a-f]{32}$"
# Printable ASCII only (a URL is; an international host name comes punycoded): one rule for Python and the spec.
WEBHOOK_URL_PATTERN = r"^[Hh][Tt][Tt][Pp][Ss]?://[!-~]+$"
WEBHOOK_URL_MAX = 2048
ONE_FIELD = lazy_gettext("send exactly one of channel, webhook_url and user_id")
PROVIDER = Literal["slack", "msteams", "discord", "line"]


class ChannelDataIn(JsonBody):
    """Where one provider's chat messages go: a Slack channel or member id, a webhook URL, or a LINE user id."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [{"required": ["channel"]}, {"required": ["webhook_url"]}, {"required": ["user_id"]}],
            "examples": [
                {"channel": "U024BE7LH"},
                {"webhook_url": "https://discord.com/api/webhooks/123456789012345678/token"},
                {"user_id": "U4af4980629" + "0" * 22},
            ],
        }
    )
    messages = {
        **JsonBody.messages,
        SLACK_CHANNEL_PATTERN: lazy_gettext("must be a Slack channel or member id such as C0123ABCD or U0123ABCD"),
        LINE_USER_PATTERN: lazy_gettext("must be a LINE user id: U and 32 hexadecimal digits"),
        WEBHOOK_URL_PATTERN: lazy_gettext("must be the webhook's https URL"),
        "one_field": ONE_FIELD,
    }

    channel: text(3, 30, SLACK_CHANNEL_PATTERN) = Field(
        None, description="slack: a member id (U…, a DM from the bot) or a channel id (C…, G…) the bot is in; "
        "needs the server's SLACK_BOT_TOKEN.", json_schema_extra=absent_by_default,
    )  # fmt: skip
    webhook_url: text(12, WEBHOOK_URL_MAX, WEBHOOK_URL_PATTERN) = Field(
        None, description="slack (incoming webhook), msteams (incoming webhook or Workflows trigger URL), discord: "
        "the webhook's https URL; its host must be one of the server's CHAT_ALLOWED_HOSTS.",
        json_schema_extra=absent_by_default,
    )  # fmt: skip
    user_id: text(33, 33, LINE_USER_PATTERN) = Field(
        None, description="line: the member's LINE user id (U…) for the server's LINE_CHANNEL_ACCESS_TOKEN's channel.",
        json_schema_extra=absent_by_default,
    )  # fmt: skip

    # The fields are never null (a null is refused as not a string): the one sent is the one that is not None.
    @model_validator(mode="after")
    def _one_field(self) -> ChannelDataIn:
        if sum(value is not None for value in (self.channel, self.webhook_url, self.user_id)) != 1:
            raise PydanticCustomError("one_field", str(ONE_FIELD))
        return self


class ChannelDataOut(BaseModel):
    """A member's channel data for one chat provider."""

    provider: PROVIDER
    channel: str | None = Field(None, description="slack: the channel or member id.")
    webhook_url: str | None = Field(None, description="The webhook URL the product set (a secret: keep it so).")
    user_id: str | None = Field(None, description="line: the member's LINE user id.")
    created_at: datetime
    updated_at: datetime
    invalidated_at: datetime | None = Field(
        description="When the provider refused it for good (no chat goes to it until it is set again); "
        "null: it did not."
    )
    invalid_reason: str | None = Field(description="What the provider said (channel_not_found, Unknown Webhook…).")

    @classmethod
    def of(cls, row: chat_accounts.ChatAccountRow) -> ChannelDataOut:
        """From a stored account."""
        data = {name: row.data.get(name) for name in ("channel", "webhook_url", "user_id")}
        return cls(provider=row.provider, **data, created_at=row.created_at, updated_at=row.updated_at,
                   invalidated_at=row.invalidated_at, invalid_reason=row.invalid_reason)  # fmt: skip


def _provider(provider: str) -> str:
    if provider not in CHAT_PROVIDERS:
        raise ApiError(404, gettext("There is no chat provider called %(provider)s.", provider=repr(provider[:40])))
    return provider


@documented(
    "putUserChannelData",
    "Set where a member's chat messages go on one provider",
    {200: ChannelDataOut, 201: ChannelDataOut},
    errors=(404, 422),
    tags=("channel data",),
    description="slack takes `channel` (with the server's SLACK_BOT_TOKEN) or `webhook_url`; msteams and discord "
    "take `webhook_url`; line takes `user_id` (with the server's LINE_CHANNEL_ACCESS_TOKEN). A webhook URL must be "
    "https on the standard port, and its host one of the server's CHAT_ALLOWED_HOSTS (Slack's, Teams' and "
    "Discord's webhook hosts by default); anything else is a 422 naming the field, and nothing is stored. Setting "
    "it again replaces it and clears an earlier invalidation. 201 when the member had none for this provider.",
)
@auth.requires("users:write")
@idempotent(ChannelDataIn)
def put_channel_data(external_id: str, provider: str, payload: ChannelDataIn):
    """Store the member's channel data for provider (201 when it is new)."""
    provider = _provider(provider)
    user_id = export.member_id(schemas.validate_path_id(external_id))
    try:
        data = chat_accounts.check_channel_data(provider, payload.model_dump(), current_app.config)
    except chat_accounts.ChannelDataRefused as refused:
        raise ApiError(422, gettext("This channel data cannot be used."),
                       errors=[{"field": refused.field, "message": refused.message}]) from None  # fmt: skip
    existed = chat_accounts.account_of(user_id, provider) is not None
    row = chat_accounts.put_account(user_id, provider, data)
    response = store(json_response(200 if existed else 201, ChannelDataOut.of(row)))
    commit()
    return response


@documented(
    "getUserChannelData",
    "A member's channel data on one provider",
    {200: ChannelDataOut},
    errors=(404, 422),
    tags=("channel data",),
    description="With whether the provider refused it for good (invalidated_at, invalid_reason). 404 when the "
    "member has none for this provider.",
)
@auth.requires("users:read")
def get_channel_data(external_id: str, provider: str):
    """The member's channel data for provider."""
    provider = _provider(provider)
    user_id = export.member_id(schemas.validate_path_id(external_id))
    row = chat_accounts.account_of(user_id, provider)
    if row is None:
        raise ApiError(404, gettext("This user has no channel data for this provider."))
    return json_response(200, ChannelDataOut.of(row))


@documented(
    "deleteUserChannelData",
    "Unlink a member's chat account on one provider",
    {204: None},
    errors=(404, 422),
    tags=("channel data",),
    description="No chat message goes there any more. 404 when the member has none for this provider.",
)
@auth.requires("users:write")
@idempotent()
def delete_channel_data(external_id: str, provider: str):
    """Forget the member's channel data for provider."""
    provider = _provider(provider)
    user_id = export.member_id(schemas.validate_path_id(external_id))
    if not chat_accounts.delete_account(user_id, provider):
        raise ApiError(404, gettext("This user has no channel data for this provider."))
    response = store(json_response(204))
    commit()
    return response


# (rule, method, view): the API blueprint adds each (app/api/views.py), in this order.
RULE = "/users/<external_id>/channel-data/<provider>"
ROUTES = ((RULE, "PUT", put_channel_data), (RULE, "GET", get_channel_data), (RULE, "DELETE", delete_channel_data))
