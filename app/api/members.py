"""The API's member endpoints: PUT/DELETE /v1/users/<id>, its counts, export, phones and sign-in links, and the
user tokens of the embeddable feed.

app/api/views.py adds ROUTES to the API blueprint, so they share its key check, rate limit, body limit and problem
documents (a member not found, not a member, an e-mail taken: its error handlers).
"""

from __future__ import annotations

from datetime import UTC, datetime

from flask import Response, current_app, stream_with_context, url_for
from flask_babel import gettext, lazy_gettext

from app import user_tokens
from app.api import auth, export_responses, responses, schemas, tenants, user_schemas
from app.api.idempotency import Withheld, idempotent, json_response, store
from app.api.schemas import ApiError
from app.auth import links
from app.devices import queries as device_queries
from app.devices import service as device_service
from app.inbox.queries import member_badge_counts
from app.notify.service import OutsideTenant
from app.tenants import queries as tenant_queries
from app.tenants import service as tenant_service
from app.unitofwork import commit
from app.users import export
from app.users import service as users
from app.web import bodies
from app.web.devices import DeviceIn, DeviceListOut, DeviceOut
from app.web.documented import documented

LOGIN_LINK_WITHHELD = Withheld(
    title=lazy_gettext("The sign-in link was already issued"),
    detail=lazy_gettext(
        "A sign-in link was already issued for this Idempotency-Key and cannot be shown again; "
        "send a new Idempotency-Key to get a new one."
    ),
)


@documented(
    "putUser",
    "Create or update a recipient",
    {200: responses.UserOut, 201: responses.UserOut},
    errors=(409,),
    tags=("users",),
)
@auth.requires("users:write")
@idempotent(user_schemas.UserIn)
def put_user(external_id: str, payload: user_schemas.UserIn):
    """Create the recipient (201) or update the fields sent (200); `tenants` replaces the member's tenants."""
    if payload.tenants is not None:  # an unknown key is refused before anything is written
        tenant_service.check_keys(payload.tenants)
    user, created = users.upsert_member(schemas.validate_path_id(external_id), payload.changes())
    user_id = export.member_id(external_id)
    if payload.tenants is not None:
        tenant_service.set_member_tenants(auth.current_key(), user_id, payload.tenants)
    user["tenants"] = tenant_queries.member_tenant_keys(user_id)
    response = store(json_response(201 if created else 200, responses.UserOut(**user)))
    commit()
    return response


@documented(
    "deleteUser",
    "Erase a recipient and everything about them",
    {204: None},
    errors=(404,),
    tags=("users",),
    description="Deletes the user, their notifications, deliveries, preferences, push "
    "subscriptions and sign-in links, and the e-mail suppressions of their address "
    "(no hashed copy is kept).",
)
@auth.requires("users:write")
@idempotent()
def delete_user(external_id: str):
    """Erase the recipient and everything about them."""
    users.erase_member(external_id)
    response = store(json_response(204))
    commit()
    return response


@documented(
    "getUserCounts",
    "A member's unread and unseen counts (the inbox badge)",
    {200: responses.CountsOut},
    errors=(404, 422),
    tags=("users",),
    description="unread: unread notifications plus unread active announcements; unseen: those of them "
    "newer than the user's last opening of the inbox. Each part (notifications, announcements) stops "
    "counting at 100, as the badge does (shown as 99+). The server's BADGE_COUNTS picks which one the "
    "inbox badge shows. Any member's external id can be read with this scope; an operator account's "
    "answers 403, an unknown one 404.",
)
@auth.requires("notifications:read")
def get_counts(external_id: str):
    """A member's two badges: unread, and unseen (unread and newer than their last opening of the inbox)."""
    counts = member_badge_counts(schemas.validate_path_id(external_id))
    return json_response(200, responses.CountsOut(unread=counts.unread, unseen=counts.unseen))


@documented(
    "exportUser",
    "Everything Hato keeps about a member, as one JSON document",
    {200: export_responses.ExportOut},
    errors=(404, 422),
    tags=("users",),
    description="The profile, preference deviations, announcement reads, and every notification (newest "
    "first) with its deliveries. The body is streamed as it is read (no Content-Length), in one "
    "consistent snapshot, so a member with 100,000 notifications costs the server one page of memory. "
    "An operator account's answers 403, an unknown one 404. Rows deleted by retention "
    "(RETENTION_* settings) are not in it.",
)
@auth.requires("users:read")
def export_user(external_id: str):
    """The member's data as one JSON document, streamed page by page (app/users/export.py)."""
    user_id = export.member_id(schemas.validate_path_id(external_id))
    commit()  # the request's own writes end here; the stream reads in a snapshot transaction of its own
    return Response(
        stream_with_context(export.stream(user_id)),
        mimetype="application/json",
        headers={"Content-Disposition": 'attachment; filename="hato-export.json"'},
    )


@documented(
    "putUserDevice",
    "Register a member's phone, or refresh it",
    {200: DeviceOut, 201: DeviceOut},
    errors=(404, 422),
    tags=("devices",),
    description="Call it at each start of the app: it refreshes last_seen_at and clears the push service's "
    "older verdict on the token. A token another member registered moves to this one (the phone changed "
    "hands). Fields left out keep their value. A member keeps at most DEVICES_MAX_PER_USER phones: beyond "
    "it, the ones the push service refused go first, then the least recently seen.",
)
@auth.requires("users:write")
@idempotent(DeviceIn)
def put_user_device(external_id: str, payload: DeviceIn):
    """Register or refresh a member's phone (201 when it is new to them)."""
    user_id = export.member_id(schemas.validate_path_id(external_id))
    registered = device_service.register(user_id, payload.fields())
    device = next(d for d in device_queries.for_user(user_id) if d.id == registered.device_id)
    response = store(json_response(201 if registered.created else 200, DeviceOut.of(device)))
    commit()
    return response


@documented(
    "listUserDevices",
    "A member's phones",
    {200: DeviceListOut},
    errors=(404, 422),
    tags=("devices",),
    description="The most recently seen first, with whether the member turned each off and whether its "
    "push service refused its token.",
)
@auth.requires("users:read")
def list_user_devices(external_id: str):
    """The member's phones."""
    user_id = export.member_id(schemas.validate_path_id(external_id))
    devices = [DeviceOut.of(row) for row in device_queries.for_user(user_id)]
    return json_response(200, DeviceListOut(devices=devices))


@documented(
    "deleteUserDevice",
    "Forget a member's phone",
    {204: None},
    errors=(404, 422),
    tags=("devices",),
    description="When the member signs out in the app. 404 when the member has no phone with this token.",
)
@auth.requires("users:write")
@idempotent()
def delete_user_device(external_id: str, token: str):
    """Forget the member's phone with this token."""
    user_id = export.member_id(schemas.validate_path_id(external_id))
    if not device_service.remove(user_id, token):
        raise ApiError(404, gettext("This user has no device with this token."))
    response = store(json_response(204))
    commit()
    return response


@documented(
    "createLoginLink",
    "A one-time sign-in URL for a member's inbox",
    {201: responses.LoginLinkOut},
    errors=(404,),
    tags=("users",),
    description="Valid for 5 minutes, works once, signs in only that user. Opening it shows a "
    "confirmation button, so link scanners that follow it do not use it up. The link is never "
    "stored: a replay of the same Idempotency-Key answers 409 (already issued) instead of showing it "
    "again; send a new key for a new link.",
)
@auth.requires("links:create")
@idempotent(withheld=LOGIN_LINK_WITHHELD)
def create_login_link(external_id: str):
    """A one-time sign-in URL (5 minutes, single use) for a member; a replay never shows it again."""
    token, expires_at = links.create_for_member(external_id)
    url = current_app.config["BASE_URL"] + url_for("auth.login_link", token=token)
    response = store(json_response(201, responses.LoginLinkOut(url=url, expires_at=expires_at)))
    commit()
    return response


@documented(
    "createUserToken",
    "A short-lived token for one member's feed (the embeddable bell)",
    {201: responses.UserTokenOut},
    errors=(404,),
    tags=("feed",),
    description="A JWT (HS256, `kid` = this key's prefix, `aud` = this Hato's BASE_URL, `sub` = the member's "
    "external id) with which the product's pages call /v1/feed and open /v1/feed/socket. It can only read "
    "and update that member's own feed and preferences. Revoking the key, or taking its feed:issue scope, "
    "invalidates every token it signed. `ttl` may be at most this server's USER_TOKEN_MAX_TTL.",
)
@auth.requires("feed:issue")
@bodies.takes_json(user_schemas.UserTokenIn)
def create_user_token(payload: user_schemas.UserTokenIn):
    """A short-lived token with which the product's pages read and update one member's feed (the bell)."""
    user_id = user_tokens.member_id(payload.user)
    if user_id is None:
        raise users.UserNotFound(payload.user)
    if payload.tenant is not None and user_tokens.tenant_of(user_id, payload.tenant) is None:
        tenants.sending_tenant(payload.tenant)  # an unknown tenant is named as such
        raise OutsideTenant([payload.user])
    token, expires_at = user_tokens.mint(auth.current_key(), payload.user, payload.ttl, payload.tenant)
    body = responses.UserTokenOut(token=token, expires_at=datetime.fromtimestamp(expires_at, UTC))
    return json_response(201, body)


@documented(
    "getUserTokenSigningSecret",
    "This key's secret for signing user tokens on the product's backend",
    {200: responses.SigningSecretOut},
    tags=("feed",),
    description="For a backend that signs its own tokens (HS256) instead of calling POST /v1/user-tokens. "
    "It is derived from the server's SECRET_KEY and the key's prefix: rotating SECRET_KEY changes it.",
)
@auth.requires("feed:issue")
def get_signing_secret():
    """This key's HS256 secret, for a backend that signs user tokens itself (it may mint them anyway)."""
    key = auth.current_key()
    body = responses.SigningSecretOut(
        kid=key.prefix, secret=user_tokens.signing_secret_text(key.prefix), audience=user_tokens.audience()
    )
    return json_response(200, body)


# (rule, method, view): the API blueprint adds each (app/api/views.py), in this order.
ROUTES = (
    ("/users/<external_id>", "PUT", put_user),
    ("/users/<external_id>", "DELETE", delete_user),
    ("/users/<external_id>/counts", "GET", get_counts),
    ("/users/<external_id>/export", "GET", export_user),
    ("/users/<external_id>/devices", "PUT", put_user_device),
    ("/users/<external_id>/devices", "GET", list_user_devices),
    ("/users/<external_id>/devices/<token>", "DELETE", delete_user_device),
    ("/users/<external_id>/login-links", "POST", create_login_link),
    ("/user-tokens", "POST", create_user_token),
    ("/user-tokens/signing-secret", "GET", get_signing_secret),
)
