"""The API's tenants (issue 32): GET, PUT, DELETE /v1/tenants/<key>, and GET, PUT …/preferences (its defaults).

app/api/views.py adds ROUTES to the API blueprint, so they share its key check, rate limit, body limit and
problem documents. The rules of a tenant's fields are app/tenants/branding.py's (the console checks the same); a
change is audited with the key's name.
"""

from __future__ import annotations

from datetime import datetime

from flask_babel import gettext
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.api import auth
from app.api.idempotency import idempotent, json_response, store
from app.api.schemas import ApiError
from app.limits import EMAIL_MAX, LINK_MAX, NAME_MAX, SENDER_NAME_MAX, TYPE_KEY_MAX
from app.tenants import branding, queries, service
from app.unitofwork import commit
from app.web.bodies import JsonBody, absent_by_default, text
from app.web.documented import documented

_absent = {"json_schema_extra": absent_by_default}


class TenantIn(JsonBody):
    """A tenant's name and branding: fields left out keep their value, null clears an optional one."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"name": "Acme Inc.", "logo_url": "https://cdn.acme.example/logo.png", "primary_color": "#1a73e8",
                 "email_sender_name": "Acme via Hato", "reply_to": "support@acme.example"}
            ]
        }
    )  # fmt: skip

    name: text(1, NAME_MAX) = Field(None, description="Required when the tenant is new.", **_absent)
    logo_url: text(1, LINK_MAX) | None = Field(
        None, description="https only, on a public host (no IP address that is not public, no localhost or *.local), "
        "without a user name; its path follows the same rules as notification links.",
    )  # fmt: skip
    primary_color: text(7, 7) | None = Field(None, description="#rrggbb.")
    email_sender_name: text(1, SENDER_NAME_MAX) | None = Field(
        None, description="The display name of the e-mails' From header; no line breaks."
    )
    reply_to: text(3, EMAIL_MAX) | None = Field(None, description="An e-mail address for the Reply-To header.")


class TenantOut(BaseModel):
    """A tenant."""

    key: str
    name: str
    logo_url: str | None
    primary_color: str | None
    email_sender_name: str | None
    reply_to: str | None
    members: int = Field(description="How many members belong to it.")
    created_at: datetime
    updated_at: datetime


Defaults = dict[text(1, TYPE_KEY_MAX), dict[text(1, 20), StrictBool]]


class PreferencesIn(JsonBody):
    """A tenant's default preferences, replaced whole: {type: {channel: on}}."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"preferences": {"comment": {"email": False}}}]})

    preferences: Defaults = Field(
        description="Per notification type and channel, whether the tenant's members get it when they have not "
        "chosen themselves. Left out: the type's default. A mandatory type stays on whatever is set here."
    )


class PreferencesOut(BaseModel):
    """A tenant's default preferences."""

    tenant: str
    preferences: dict[str, dict[str, bool]]


def _tenant(key: str):
    item = queries.tenant(key) if branding.key_ok(key) else None
    if item is None:
        raise ApiError(404, gettext("There is no tenant called %(key)s.", key=repr(key[:100])))
    return item


def _out(item) -> TenantOut:
    return TenantOut(key=item.key, name=item.name, logo_url=item.logo_url, primary_color=item.primary_color,
                     email_sender_name=item.email_sender_name, reply_to=item.reply_to,
                     members=queries.member_count(item.id),
                     created_at=item.created_at, updated_at=item.updated_at)  # fmt: skip


def _preferences_out(item) -> PreferencesOut:
    listed: dict[str, dict[str, bool]] = {}
    for (type_, channel), enabled in sorted(queries.preferences(item.id).items()):
        listed.setdefault(type_, {})[channel] = enabled
    return PreferencesOut(tenant=item.key, preferences=listed)


def invalid(problems) -> ApiError:
    """The 422 naming every field at fault (nothing was stored)."""
    errors = [{"field": field, "message": str(message)} for field, message in problems]
    return ApiError(422, gettext("Nothing was saved: some tenant settings break their rules."), errors=errors)


@documented("getTenant", "A tenant", {200: TenantOut}, errors=(404,), tags=("tenants",))
@auth.requires("tenants:read")
def get_tenant(tenant_key: str):
    """The tenant."""
    return json_response(200, _out(_tenant(tenant_key)))


@documented(
    "putTenant",
    "Create or update a tenant (name and branding)",
    {200: TenantOut, 201: TenantOut},
    errors=(422,),
    tags=("tenants",),
    description="Creates the tenant (201; `name` is then required) or updates the fields sent (200). A field that "
    "breaks its rule gets a 422 naming it, and nothing is stored. Members join with PUT /v1/users/{id} "
    "(`tenants`), notifications name it with `tenant`.",
)
@auth.requires("tenants:write")
@idempotent(TenantIn)
def put_tenant(tenant_key: str, payload: TenantIn):
    """Create or update the tenant."""
    try:
        item, created = service.put_tenant(auth.current_key(), tenant_key, payload.model_dump(
            include=payload.model_fields_set))  # fmt: skip
    except service.TenantInvalid as error:
        raise invalid(error.problems) from None
    response = store(json_response(201 if created else 200, _out(item)))
    commit()
    return response


@documented(
    "deleteTenant",
    "Delete a tenant",
    {204: None},
    errors=(404,),
    tags=("tenants",),
    description="Its memberships and default preferences go with it. Its notifications stay in their members' "
    "inboxes (outside any tenant's scope); user tokens that name it are refused from then on.",
)
@auth.requires("tenants:write")
@idempotent()
def delete_tenant(tenant_key: str):
    """Delete the tenant."""
    if not branding.key_ok(tenant_key) or not service.delete_tenant(auth.current_key(), tenant_key):
        raise ApiError(404, gettext("There is no tenant called %(key)s.", key=repr(tenant_key[:100])))
    response = store(json_response(204))
    commit()
    return response


@documented("getTenantPreferences", "A tenant's default preferences", {200: PreferencesOut}, errors=(404,),
            tags=("tenants",))  # fmt: skip
@auth.requires("tenants:read")
def get_preferences(tenant_key: str):
    """The tenant's defaults."""
    return json_response(200, _preferences_out(_tenant(tenant_key)))


@documented(
    "putTenantPreferences",
    "Set a tenant's default preferences",
    {200: PreferencesOut},
    errors=(404, 422),
    tags=("tenants",),
    description="Replaces the tenant's defaults. For a notification sent with `tenant`, each channel is on as the "
    "member chose, else as the tenant's default says, else as the type's default; a mandatory type is always on. "
    "An unknown type or channel gets a 422 naming it, and nothing is stored.",
)
@auth.requires("tenants:write")
@idempotent(PreferencesIn)
def put_preferences(tenant_key: str, payload: PreferencesIn):
    """Replace the tenant's defaults."""
    item = _tenant(tenant_key)
    defaults = [(type_, channel, on) for type_, channels in payload.preferences.items() for channel, on in
                channels.items()]  # fmt: skip
    try:
        service.set_preferences(auth.current_key(), item, defaults)
    except service.InvalidPreferences as error:
        errors = [{"field": field, "message": message} for field, message in error.problems]
        raise ApiError(422, gettext("Nothing was saved: some defaults name no type or channel."),
                       errors=errors) from None  # fmt: skip
    response = store(json_response(200, _preferences_out(item)))
    commit()
    return response


def sending_tenant(key: str | None) -> queries.Sending | None:
    """The tenant a request names, with its quota (None: none named); an unknown one is a 422 naming it."""
    if key is None:
        return None
    found = queries.sending_tenant(key)
    if found is None:
        raise service.UnknownTenants([key])
    return found


# (rule, method, view): the API blueprint adds each (app/api/views.py), in this order.
RULE = "/tenants/<tenant_key>"
ROUTES = (
    (RULE, "GET", get_tenant),
    (RULE, "PUT", put_tenant),
    (RULE, "DELETE", delete_tenant),
    (RULE + "/preferences", "GET", get_preferences),
    (RULE + "/preferences", "PUT", put_preferences),
)
