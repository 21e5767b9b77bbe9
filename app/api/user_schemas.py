"""Request models of the JSON API about members: PUT /v1/users/<external_id> and POST /v1/user-tokens."""

from __future__ import annotations

import json
from typing import Annotated

from flask import current_app
from flask_babel import gettext
from pydantic import ConfigDict, Field, StrictBool
from pydantic_core import PydanticCustomError, core_schema

from app import limits, phones
from app.api.schemas import (
    PHONE_MESSAGE,
    PROPERTIES_MESSAGE,
    ApiError,
    ApiIn,
    DataKey,
    EmailAddress,
    ExternalId,
    JsonValue,
    Locale,
    PhoneNumber,
)
from app.web.bodies import Timezone, absent_by_default
from app.web.bodies import text as _text


class UserIn(ApiIn):
    """PUT /v1/users/{external_id}: fields left out keep their value (a new user gets the defaults)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"email": "ann@example.com", "display_name": "Ann Lee", "locale": "en", "timezone": "Europe/Paris"}
            ]
        }
    )

    email: EmailAddress | None = Field(None, description="null removes the address.")
    display_name: _text(0, limits.NAME_MAX) = Field(None, json_schema_extra=absent_by_default)
    locale: Locale = Field(
        None, description="Default: the server's DEFAULT_LOCALE.", json_schema_extra=absent_by_default
    )
    timezone: Timezone = Field(
        None, description="Default: the server's DEFAULT_TIMEZONE.", json_schema_extra=absent_by_default
    )
    phone: PhoneNumber | None = Field(
        None,
        description="The member's mobile number for SMS, stored as E.164: international (+81 90 1234 5678) or "
        "national, read in the server's DEFAULT_PHONE_REGION. Your service vouches for it (it counts as verified); "
        "null removes it.",
    )
    sms_opt_in: StrictBool = Field(
        None,
        description="The member's consent to SMS, recorded with its time and source `api`. SMS goes only to a "
        "verified number with consent; a STOP reply withdraws it.",
        json_schema_extra=absent_by_default,
    )

    properties: dict[DataKey, JsonValue] = Field(
        None,
        description="What your product knows of the member that workflow conditions may test, such as "
        '{"plan": "pro"} (read as recipient.properties.plan). Replaced whole; at most '
        f"{limits.PROPERTIES_MAX_BYTES} bytes as JSON.",
        json_schema_extra=absent_by_default,
    )

    tenants: Annotated[list[_text(1, limits.TENANT_KEY_MAX)], Field(max_length=100)] = Field(
        None,
        description="The keys of the tenants the member belongs to, replacing the ones before ([] leaves every "
        "tenant). An unknown key gets a 422 naming it, and nothing is changed.",
        json_schema_extra=absent_by_default,
    )

    def changes(self) -> dict:
        """The fields the request actually sent, the phone number as E.164 (tenants apart: member_tenants())."""
        # The size of an object is no JSON Schema rule: a schema-shaped body over it is a business 422.
        if self.properties is not None and len(json.dumps(self.properties).encode()) > limits.PROPERTIES_MAX_BYTES:
            errors = [{"field": "properties", "message": str(PROPERTIES_MESSAGE)}]
            raise ApiError(422, gettext("These properties are too large to keep."), errors=errors)
        changes = self.model_dump(include=self.model_fields_set - {"tenants"})
        if changes.get("phone") is not None:
            changes["phone"] = e164(changes["phone"])
        return changes


def e164(raw: str) -> str:
    """raw as E.164 (a national number read in DEFAULT_PHONE_REGION); 422 naming the field when no phone has it."""
    try:
        return phones.normalise(raw, current_app.config["DEFAULT_PHONE_REGION"])
    except phones.InvalidPhone:
        errors = [{"field": "phone", "message": str(PHONE_MESSAGE)}]
        raise ApiError(422, gettext("This is not a phone number SMS can be sent to."), errors=errors) from None


class AtMostSetting:
    """An upper bound that is a setting: checked against the app's config, and stated by the OpenAPI document.

    (The document is built in the app's context, so it names the limit this server enforces.)
    """

    def __init__(self, setting: str) -> None:
        self.setting = setting

    def __get_pydantic_core_schema__(self, source, handler):
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def check(self, value: int) -> int:
        """Refuse a value over the setting, with pydantic's own error (so the message is translated as usual)."""
        limit = current_app.config[self.setting]
        if value > limit:
            raise PydanticCustomError("less_than_equal", "Input should be less than or equal to {le}", {"le": limit})
        return value

    def __get_pydantic_json_schema__(self, schema, handler):
        return {**handler(schema), "maximum": current_app.config[self.setting]}


class UserTokenIn(ApiIn):
    """POST /v1/user-tokens: a short-lived token for one member's feed."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"user": "user-42", "ttl": 3600}]})

    user: ExternalId = Field(description="The member's external id (the token's `sub`).")
    # The default is checked too: a server whose USER_TOKEN_MAX_TTL is under an hour refuses it.
    ttl: Annotated[int, Field(ge=60), AtMostSetting("USER_TOKEN_MAX_TTL")] = Field(
        3600, validate_default=True, description="Seconds until the token expires (60 to USER_TOKEN_MAX_TTL)."
    )
    tenant: _text(1, limits.TENANT_KEY_MAX) = Field(
        None,
        description="A tenant's key (the token's `tenant` claim): the feed, its counts and its socket then show only "
        "that tenant's notifications, plus announcements. The member must belong to it (else 422).",
        json_schema_extra=absent_by_default,
    )
