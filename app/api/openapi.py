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
        "get",
        "/v1/ping",
        "ping",
        "Is the API process up (no key needed)",
        {200: answers.Ping},
        public=True,
        tags=("meta",),
    ),
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
    errors = op.errors if op.public else (*op.errors, *AUTHED_ERRORS)
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
    inputs = {op.body for op in OPERATIONS if op.body is not None}
    outputs = {
        m
        for op in OPERATIONS
        for model in op.responses.values()
        for m in (model if isinstance(model, tuple) else (model,))
        if m is not None
    } | {answers.Problem}
    models = [(m, "validation") for m in sorted(inputs, key=lambda m: m.__name__)]
    models += [(m, "serialization") for m in sorted(outputs, key=lambda m: m.__name__)]
    refs, definitions = models_json_schema(models, ref_template=REF, schema_generator=StrictKeysJsonSchema)
    paths: dict[str, dict] = {}
    for op in OPERATIONS:
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
                }
            },
        },
    }
