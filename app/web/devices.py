"""The body that registers a phone: the API's PUT /v1/users/{id}/devices and the feed's POST /v1/feed/devices."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from flask_babel import lazy_gettext
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from app.limits import APP_ID_MAX, APP_VERSION_MAX, DEVICE_TOKEN_MAX, LOCALE_MAX
from app.web.bodies import JsonBody, Timezone, absent_by_default, text

# FCM registration tokens are URL-safe base64 with ':' (and may grow); APNs tokens are hex (checked below).
TOKEN_PATTERN = r"^[A-Za-z0-9_:.\-]+$"  # noqa: S105 - a pattern, not a secret
APNS_TOKEN_MAX = 200  # 64 hex characters today; Apple says the length may change
APNS_TOKEN_PATTERN = rf"^([0-9a-fA-F]{{2}}){{1,{APNS_TOKEN_MAX // 2}}}$"  # whole bytes in hex
APP_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._\-]*$"
VERSION_PATTERN = r"^[^\x00-\x1f\x7f]+$"
LOCALE_PATTERN = r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8}){0,3}$"


class DeviceIn(JsonBody):
    """A phone to register, or to refresh: its platform and push token, and what its app says about itself."""

    model_config = ConfigDict(
        json_schema_extra={
            # The spec states the iOS rule too, so a generated request that follows it is accepted.
            "if": {"properties": {"platform": {"const": "ios"}}, "required": ["platform"]},
            "then": {"properties": {"token": {"pattern": APNS_TOKEN_PATTERN}}},
            "examples": [
                {
                    "platform": "ios",
                    "token": "a" * 64,
                    "app_id": "com.example.app",
                    "app_version": "4.2.0",
                    "locale": "ja-JP",
                    "timezone": "Asia/Tokyo",
                },  # fmt: skip
                {"platform": "android", "token": "fcm-registration-token", "app_id": "com.example.app"},
            ],
        }
    )
    messages = {
        **JsonBody.messages,
        TOKEN_PATTERN: lazy_gettext("must be the push token the phone's operating system gave the app"),
        APP_ID_PATTERN: lazy_gettext("must be a bundle id or package name such as com.example.app"),
        VERSION_PATTERN: lazy_gettext("must not contain control characters"),
        LOCALE_PATTERN: lazy_gettext("must be a language tag such as en or ja-JP"),
        "timezone": lazy_gettext("must be an IANA time zone name such as Europe/Paris"),
        "apns_token": lazy_gettext("must be the APNs device token in hexadecimal (64 characters today)"),
    }

    platform: Literal["ios", "android"] = Field(description="ios: sent through APNs; android: through FCM.")
    token: text(1, DEVICE_TOKEN_MAX, TOKEN_PATTERN) = Field(
        description="The APNs device token (hex) or the FCM registration token. A token another user registered "
        "moves to this one."
    )
    app_id: text(1, APP_ID_MAX, APP_ID_PATTERN) | None = Field(
        None, description="The iOS bundle id (the apns-topic) or the Android package name.",
        json_schema_extra=absent_by_default,
    )  # fmt: skip
    app_version: text(1, APP_VERSION_MAX, VERSION_PATTERN) | None = Field(None, json_schema_extra=absent_by_default)
    locale: text(2, LOCALE_MAX, LOCALE_PATTERN) | None = Field(
        None, description="The language the phone shows alerts in; default: the user's.",
        json_schema_extra=absent_by_default,
    )  # fmt: skip
    timezone: Timezone | None = Field(None, json_schema_extra=absent_by_default)

    @field_validator("token")
    @classmethod
    def _apns_token_is_hex(cls, token: str, info: ValidationInfo) -> str:
        if info.data.get("platform") == "ios":
            if not re.fullmatch(APNS_TOKEN_PATTERN, token):
                raise PydanticCustomError("apns_token", "not an APNs device token")
            return token.lower()  # APNs tokens are case-insensitive hex: one phone, one row
        return token

    def fields(self) -> dict:
        """The registration's fields (None: keep what the phone registered before)."""
        return self.model_dump()


class DeviceOut(BaseModel):
    """A registered phone as the API answers it."""

    id: int
    platform: Literal["ios", "android"]
    token: str
    app_id: str | None
    app_version: str | None
    locale: str | None
    timezone: str | None
    created_at: datetime
    last_seen_at: datetime = Field(description="The latest registration (the app registers at each start).")
    last_sent_at: datetime | None
    enabled: bool = Field(description="false: the member turned pushes to this phone off (preferences).")
    invalidated_at: datetime | None = Field(
        description="When the push service said the token is gone; null: it did not."
    )
    invalid_reason: str | None = Field(description="What it said: Unregistered, BadDeviceToken, UNREGISTERED…")

    @classmethod
    def of(cls, row) -> DeviceOut:
        """From an app/devices/queries.py DeviceRow."""
        fields = {name: getattr(row, name) for name in cls.model_fields if name != "enabled"}
        return cls(**fields, enabled=row.disabled_at is None)


class DeviceListOut(BaseModel):
    """GET /v1/users/{external_id}/devices: the member's phones, the most recently seen first."""

    devices: list[DeviceOut]
