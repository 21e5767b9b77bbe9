"""The OpenAPI 3.1 document, generated from the models in schemas.py and responses.py (spec and code cannot drift).

The document is developer documentation and stays English whatever the caller's Accept-Language (the problem
documents the API answers with are translated; their type, status and field names are the same in every
language, which is what the spec describes): it is built under force_locale of the source language.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from flask_babel import force_locale
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, models_json_schema

from app.api import responses as answers
from app.api import schemas
from app.api.idempotency import KEY_PATTERN, MAX_KEY_LENGTH
from app.api_keys.scopes import SCOPES
from app.i18n import LANGUAGES
from app.pagination import MAX_ID
from app.web.errors import MESSAGES

REF = "#/components/schemas/{model}"


class StrictKeysJsonSchema(GenerateJsonSchema):
    """pydantic checks every key of a dict against its key type: say so with propertyNames.

    (pydantic writes `patternProperties`, which would let other keys through in the spec.)
    """

    def dict_schema(self, schema):
        json_schema = super().dict_schema(schema)
        pattern_properties = json_schema.pop("patternProperties", None)
        if pattern_properties:
            ((pattern, values),) = pattern_properties.items()
            json_schema["additionalProperties"] = values
            json_schema.setdefault("propertyNames", {})["pattern"] = pattern
        return json_schema


@dataclass(frozen=True)
class Operation:
    """One documented endpoint."""

    method: str
    path: str
    operation_id: str
    summary: str
    responses: dict[int, type[BaseModel] | tuple[type[BaseModel], ...] | None]  # a tuple: one of these
    errors: tuple[int, ...] = ()
    body: type[BaseModel] | None = None
    params: tuple[dict, ...] = ()
    idempotent: bool = False
    public: bool = False
    scope: str | None = None  # the scope its key needs (the view's @auth.requires, checked by the tests)
    description: str = ""
    tags: tuple[str, ...] = field(default=("notifications",))
    auth: str = "bearerAuth"  # the security scheme: an API key, or userToken for the feed


EXTERNAL_ID = {
    "name": "external_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": schemas.EXTERNAL_ID_PATTERN},
    "description": "The product's id for the user.",
    "example": "user-42",
}
NOTIFICATION_ID = {
    "name": "notification_id",
    "in": "path",
    "required": True,
    "schema": {"type": "integer", "format": "int64", "minimum": 1, "maximum": MAX_ID},
}
CANCELLATION_KEY = {
    "name": "cancellation_key",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "minLength": 1, "maxLength": schemas.KEY_MAX},
    "description": "The `cancellation_key` sent with the notifications.",
    "example": "order:42",
}
IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH, "pattern": KEY_PATTERN},
    "description": "Any unique string (a UUID is best). The same key with the same request "
    "replays the first response for 24 h (header Idempotent-Replayed: true); "
    "with a different request: 422; while the first is still running: 409.",
}

AUTHED_ERRORS = (401, 403, 429, 503)
BODY_ERRORS = (400, 413, 415, 422)

OPERATIONS = (
    Operation(
        "post",
        "/v1/notifications",
        "createNotifications",
        "Send a notification to 1-1,000 recipients",
        {202: (answers.NotificationAccepted, answers.NotificationScheduled)},
        (*BODY_ERRORS, 409),
        body=schemas.NotificationIn,
        idempotent=True,
        scope="notifications:write",
        description="Writes one notification per recipient (a repeat of the same dedupe key is not an "
        "error) and its e-mail/push deliveries as the recipient's preferences allow. Unknown "
        "type or recipients: 422 and nothing is written. With a future `send_at` nothing is written "
        "but the schedule: the answer is a NotificationScheduled (`status: scheduled`); at `send_at` the "
        "notifications appear and their deliveries start. A recipient who muted the `group_key` thread "
        "gets the notification stored read and hidden, and its e-mail/push skipped (reason `muted`). "
        "The type's timing (set in the console) applies to e-mail/push: with `escalate_after` they wait "
        "that long and are skipped (reason `read` / `seen`) if the notification was read (or seen) by "
        "then; `skip_when_online` skips them (reason `online`) while the user has the app open; a "
        "frequency cap sends the e-mail excess to the user's next digest (reason `digested`) and skips the "
        "push excess (reason `capped`); e-mail of a type the user gets as an hourly or daily digest is "
        "skipped with reason `digested` and listed in that digest.",
    ),
    Operation(
        "delete",
        "/v1/cancellations/{cancellation_key}",
        "cancelNotifications",
        "Cancel what has not happened yet under a cancellation key",
        {200: answers.CancellationOut},
        (400, 409, 422),
        params=(CANCELLATION_KEY,),
        idempotent=True,
        scope="notifications:write",
        description="For the notifications this API key sent with this `cancellation_key`: scheduled ones "
        "not yet sent are removed, pending e-mail/push deliveries and waiting escalations become skipped "
        "(reason `cancelled`). Other keys' notifications are never touched. A repeat answers zeros.",
    ),
    Operation(
        "get",
        "/v1/notifications/{notification_id}",
        "getNotification",
        "A notification and its per-channel delivery state",
        {200: answers.NotificationOut},
        (404,),
        params=(NOTIFICATION_ID,),
        scope="notifications:read",
        description="Only the API key that created the notification can read it; for any other key the "
        "answer is 404, as if the id did not exist.",
    ),
    Operation(
        "put",
        "/v1/users/{external_id}",
        "putUser",
        "Create or update a recipient",
        {200: answers.UserOut, 201: answers.UserOut},
        (*BODY_ERRORS, 403, 409),
        body=schemas.UserIn,
        params=(EXTERNAL_ID,),
        idempotent=True,
        scope="users:write",
        tags=("users",),
    ),
    Operation(
        "delete",
        "/v1/users/{external_id}",
        "deleteUser",
        "Erase a recipient and everything about them",
        {204: None},
        (400, 403, 404, 409, 422),
        params=(EXTERNAL_ID,),
        idempotent=True,
        scope="users:write",
        tags=("users",),
        description="Deletes the user, their notifications, deliveries, preferences, push "
        "subscriptions and sign-in links, and the e-mail suppressions of their address "
        "(no hashed copy is kept).",
    ),
    Operation(
        "get",
        "/v1/users/{external_id}/counts",
        "getUserCounts",
        "A member's unread and unseen counts (the inbox badge)",
        {200: answers.CountsOut},
        (403, 404, 422),
        params=(EXTERNAL_ID,),
        scope="notifications:read",
        tags=("users",),
        description="unread: unread notifications plus unread active announcements; unseen: those of them "
        "newer than the user's last opening of the inbox. Each part (notifications, announcements) stops "
        "counting at 100, as the badge does (shown as 99+). The server's BADGE_COUNTS picks which one the "
        "inbox badge shows. Any member's external id can be read with this scope; an operator account's "
        "answers 403, an unknown one 404.",
    ),
    Operation(
        "get",
        "/v1/users/{external_id}/export",
        "exportUser",
        "Everything Hato keeps about a member, as one JSON document",
        {200: answers.ExportOut},
        (403, 404, 422),
        params=(EXTERNAL_ID,),
        scope="users:read",
        tags=("users",),
        description="The profile, preference deviations, announcement reads, and every notification (newest "
        "first) with its deliveries. The body is streamed as it is read (no Content-Length), in one "
        "consistent snapshot, so a member with 100,000 notifications costs the server one page of memory. "
        "An operator account's answers 403, an unknown one 404. Rows deleted by retention "
        "(RETENTION_* settings) are not in it.",
    ),
    Operation(
        "post",
        "/v1/users/{external_id}/login-links",
        "createLoginLink",
        "A one-time sign-in URL for a member's inbox",
        {201: answers.LoginLinkOut},
        (400, 403, 404, 409, 422),
        params=(EXTERNAL_ID,),
        idempotent=True,
        scope="links:create",
        tags=("users",),
        description="Valid for 5 minutes, works once, signs in only that user. Opening it shows a "
        "confirmation button, so link scanners that follow it do not use it up. The link is never "
        "stored: a replay of the same Idempotency-Key answers 409 (already issued) instead of showing it "
        "again; send a new key for a new link.",
    ),
    Operation(
        "post",
        "/v1/user-tokens",
        "createUserToken",
        "A short-lived token for one member's feed (the embeddable bell)",
        {201: answers.UserTokenOut},
        (*BODY_ERRORS, 404),
        body=schemas.UserTokenIn,
        scope="feed:issue",
        tags=("feed",),
        description="A JWT (HS256, `kid` = this key's prefix, `aud` = this Hato's BASE_URL, `sub` = the member's "
        "external id) with which the product's pages call /v1/feed and open /v1/feed/socket. It can only read "
        "and update that member's own feed and preferences. Revoking the key, or taking its feed:issue scope, "
        "invalidates every token it signed.",
    ),
    Operation(
        "get",
        "/v1/user-tokens/signing-secret",
        "getUserTokenSigningSecret",
        "This key's secret for signing user tokens on the product's backend",
        {200: answers.SigningSecretOut},
        scope="feed:issue",
        tags=("feed",),
        description="For a backend that signs its own tokens (HS256) instead of calling POST /v1/user-tokens. "
        "It is derived from the server's SECRET_KEY and the key's prefix: rotating SECRET_KEY changes it.",
    ),
    Operation(
        "get",
        "/v1/ping",
        "ping",
        "Is the API process up (no key needed)",
        {200: answers.Ping},
        public=True,
        tags=("meta",),
    ),
)

ANNOUNCEMENT_ID = {**NOTIFICATION_ID, "name": "announcement_id"}
FEED_ERRORS = (400, 401, 403, 404, 422, 429)
FEED_PAGE_PARAMS = (
    {"name": "filter", "in": "query", "schema": {"type": "string", "enum": ["all", "unread", "archived", "snoozed"]}},
    {"name": "cursor", "in": "query", "schema": {"type": "string", "maxLength": 200}},
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 50}},
)


def _feed(method: str, path: str, operation_id: str, summary: str, answer, **extra) -> Operation:
    return Operation(method, "/v1/feed" + path, operation_id, summary, {200: answer}, FEED_ERRORS,
                     tags=("feed",), auth="userToken", **extra)  # fmt: skip


def _feed_action(path: str, operation_id: str, summary: str, **extra) -> Operation:
    params = (ANNOUNCEMENT_ID if "{announcement_id}" in path else NOTIFICATION_ID,)
    return _feed("post", path, operation_id, summary, answers.FeedChangeOut, params=params, **extra)


# The headless feed (app/feed/views.py): a member's own inbox, for pages of FEED_ALLOWED_ORIGINS (CORS).
FEED_OPERATIONS = (
    _feed(
        "get",
        "",
        "getFeed",
        "One page of the member's notifications (and announcements)",
        answers.FeedPageOut,
        params=FEED_PAGE_PARAMS,
    ),  # fmt: skip
    _feed("get", "/counts", "getFeedCounts", "The member's unread and unseen counts", answers.FeedCountsOut),
    _feed_action("/notifications/{notification_id}/read", "feedMarkRead", "Mark a notification read (idempotent)"),
    _feed_action("/notifications/{notification_id}/archive", "feedArchive", "Archive a notification (idempotent)"),
    _feed_action("/notifications/{notification_id}/unarchive", "feedUnarchive", "Move it back to the inbox"),
    _feed_action(
        "/notifications/{notification_id}/snooze",
        "feedSnooze",
        'Snooze until {"choice": "hour"|"tomorrow"|"monday"} or {"until": a local date-time}',
    ),  # fmt: skip
    _feed_action("/notifications/{notification_id}/unsnooze", "feedUnsnooze", "Wake a snoozed notification now"),
    _feed_action("/notifications/{notification_id}/mute", "feedMute", "Mute the notification's thread"),
    _feed_action("/announcements/{announcement_id}/read", "feedReadAnnouncement", "Mark an announcement read"),
    _feed("post", "/read-all", "feedReadAll", "Mark everything read", answers.FeedChangeOut),
    _feed("post", "/seen", "feedSeen", "Record that the member looked (unseen back to 0)", answers.FeedChangeOut),
    _feed(
        "get",
        "/preferences",
        "getFeedPreferences",
        "The member's type × channel preferences",
        answers.FeedPreferencesOut,
    ),  # fmt: skip
    _feed(
        "put",
        "/preferences",
        "putFeedPreference",
        "Turn one type × channel on or off (mandatory: 422)",
        answers.FeedPreferencesOut,
        body=schemas.FeedPreferenceIn,
    ),  # fmt: skip
)

PROBLEM = "application/problem+json"
HEADER_INT = {"schema": {"type": "integer", "minimum": 0}}


def _json(ref: dict) -> dict:
    return {"application/json": {"schema": ref}}


def _responses(op: Operation, refs: dict) -> dict:
    responses = {}
    for status, model in op.responses.items():
        response = {"description": "OK" if status < 300 else str(MESSAGES.get(status, ""))}
        if isinstance(model, tuple):
            response["content"] = _json({"oneOf": [refs[(m, "serialization")] for m in model]})
        elif model is not None:
            response["content"] = _json(refs[(model, "serialization")])
        if op.idempotent:
            response["headers"] = {
                "Idempotent-Replayed": {
                    "schema": {"type": "string", "enum": ["true"]},
                    "description": "Present on a replay.",
                }
            }
        responses[str(status)] = response
    problem = {PROBLEM: {"schema": refs[(answers.Problem, "serialization")]}}
    errors = op.errors if op.public or op.auth != "bearerAuth" else (*op.errors, *AUTHED_ERRORS)
    for status in sorted(set(errors)):
        response = {"description": str(MESSAGES.get(status, "Error")), "content": problem}
        if status in (409, 429, 503):
            response["headers"] = {"Retry-After": HEADER_INT}
        if status == 429:
            response["headers"].update(
                {"RateLimit-Limit": HEADER_INT, "RateLimit-Remaining": HEADER_INT, "RateLimit-Reset": HEADER_INT}
            )
        responses[str(status)] = response
    return responses


def _operation(op: Operation, refs: dict) -> dict:
    spec = {
        "operationId": op.operation_id,
        "summary": op.summary,
        "tags": list(op.tags),
        "responses": _responses(op, refs),
    }
    if op.description:
        spec["description"] = op.description
    params = [*op.params, *([IDEMPOTENCY_KEY] if op.idempotent else [])]
    if params:
        spec["parameters"] = params
    if op.body is not None:
        spec["requestBody"] = {"required": True, "content": _json(refs[(op.body, "validation")])}
    if op.public:
        spec["security"] = []
    elif op.auth != "bearerAuth":
        spec["security"] = [{op.auth: []}]
    elif op.scope is not None:
        # OpenAPI 3.1 lets a bearer requirement list role names: here, the key's scope.
        spec["security"] = [{"bearerAuth": [op.scope]}]
    return spec


@functools.cache
def spec(base_url: str) -> dict:
    """Return the OpenAPI 3.1 document for a deployment at base_url, in English (see the module's docstring)."""
    with force_locale(LANGUAGES[0]):
        return _document(base_url)


def _document(base_url: str) -> dict:
    operations = (*OPERATIONS, *FEED_OPERATIONS)
    inputs = {op.body for op in operations if op.body is not None}
    outputs = {
        m
        for op in operations
        for model in op.responses.values()
        for m in (model if isinstance(model, tuple) else (model,))
        if m is not None
    } | {answers.Problem}
    models = [(m, "validation") for m in sorted(inputs, key=lambda m: m.__name__)]
    models += [(m, "serialization") for m in sorted(outputs, key=lambda m: m.__name__)]
    refs, definitions = models_json_schema(models, ref_template=REF, schema_generator=StrictKeysJsonSchema)
    paths: dict[str, dict] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method] = _operation(op, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Hato API",
            "version": "1",
            "description": "Notifications for product services. Errors are RFC 9457 problem documents. "
            "Rate limits are per API key (RateLimit-* headers).",
        },
        "servers": [{"url": base_url}],
        "security": [{"bearerAuth": []}],
        "paths": paths,
        "components": {
            "schemas": definitions.get("$defs", {}),
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key from `flask api-keys create NAME --scope …` or the console. "
                    "Each operation lists the scope its key needs; without it the answer is 403 with "
                    '`WWW-Authenticate: Bearer error="insufficient_scope"`. Scopes: '
                    + " ".join(f"`{name}`: {str(text)}" for name, text in SCOPES.items()),
                },
                "userToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": "A user token from POST /v1/user-tokens (or signed by the product's backend "
                    "with its key's signing secret). 401 with `code: expired` means: fetch a new one.",
                },
            },
        },
    }
