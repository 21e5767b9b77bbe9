"""The OpenAPI 3.1 document, built by walking the app's /v1 routes, so it cannot drift from them.

Each /v1 view carries @documented (app/web/documented.py: its summary, answers and own errors); its body and
query models come from the decorators that validate them (@idempotent, @takes_json, @takes_query), its scope
from @auth.requires, its path parameters from the route, and the limits from this server's config (the body
size, USER_TOKEN_MAX_TTL, the rate limit). A /v1 route without @documented makes the build fail.

Why not a library: flask-openapi3 and spectree validate the request themselves, before the view's own
decorators run and with their own 422 shape. Here the scope is checked before the body is read, the body is
validated inside the Idempotency-Key claim (which hashes the parsed body), and every refusal is an RFC 9457
problem document in the caller's language; flask-openapi3 also wants its own app and blueprint classes.
Either would mean validating twice or rewriting every view, for a document built here from the same models.

The document is developer documentation and stays English whatever the caller's Accept-Language (the problem
documents the API answers with are translated; their type, status and field names are the same in every
language, which is what the spec describes): it is built under force_locale of the source language.
"""

from __future__ import annotations

import re

from flask import Flask
from flask_babel import force_locale
from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, models_json_schema

from app import user_tokens
from app.api import auth, notification_schemas, schemas, workflows
from app.api import responses as answers
from app.api.idempotency import KEY_PATTERN, MAX_KEY_LENGTH
from app.api_keys.scopes import SCOPES
from app.i18n import LANGUAGES
from app.limits import DEVICE_TOKEN_MAX, TENANT_KEY_MAX
from app.models.chat import CHAT_PROVIDERS
from app.pagination import MAX_ID
from app.tenants.branding import KEY_PATTERN as TENANT_KEY_PATTERN
from app.web.bodies import too_large
from app.web.devices import TOKEN_PATTERN
from app.web.documented import Doc, body_limit_setting
from app.web.errors import MESSAGES

REF = "#/components/schemas/{model}"
PROBLEM = "application/problem+json"
HEADER_INT = {"schema": {"type": "integer", "minimum": 0}}
# The settings the document states: a change of any of them builds it anew.
STATED_SETTINGS = ("BASE_URL", "API_MAX_BODY_BYTES", "API_RATE_LIMIT", "USER_TOKEN_MAX_TTL")

# Refusals that come with what an operation takes, added to the ones its view declares.
BODY_ERRORS = (400, 413, 415, 422)
QUERY_ERRORS = (422,)
IDEMPOTENCY_ERRORS = (400, 409, 422)  # a malformed key, the same key in flight, the same key for another request
AUTH_ERRORS = {
    "bearerAuth": (401, 403, 429, 503),  # no key, a missing scope, the key's rate limit, Redis down
    "userToken": (401, 403, 429),  # a refused token, an origin outside FEED_ALLOWED_ORIGINS, the rate limit
    None: (),
}


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


def _path_parameters() -> dict[str, dict]:
    """The URL variables of the /v1 routes, with the rules their views check them by."""
    row_id = {"type": "integer", "format": "int64", "minimum": 1, "maximum": MAX_ID}
    return {
        "external_id": {
            "schema": TypeAdapter(schemas.ExternalId).json_schema(),
            "description": "The product's id for the user.",
            "example": "user-42",
        },
        "notification_id": {"schema": row_id},
        "action_name": {
            "schema": TypeAdapter(notification_schemas.ActionName).json_schema(),
            "description": "The `action` of one of the notification's action buttons.",
            "example": "approve",
        },
        "fanout_id": {"schema": row_id, "description": "The `fanout.id` of POST /v1/notifications with `topic`."},
        "topic_key": {
            "schema": TypeAdapter(schemas.TopicKey).json_schema(),
            "description": "The product's key for the topic.",
            "example": "project:42",
        },
        "announcement_id": {"schema": row_id},
        "cancellation_key": {
            "schema": TypeAdapter(schemas.Key).json_schema(),
            "description": "The `cancellation_key` sent with the notifications.",
            "example": "order:42",
        },
        "provider": {
            "schema": {"type": "string", "enum": list(CHAT_PROVIDERS)},
            "description": "The chat provider: slack, msteams (Microsoft Teams), discord or line.",
            "example": "slack",
        },
        "type_key": {
            "schema": {"type": "string", "minLength": 2, "maxLength": 63, "pattern": workflows.TYPE_KEY_PATTERN},
            "description": "The notification type's key.",
            "example": "comment",
        },
        "tenant_key": {
            "schema": {"type": "string", "minLength": 1, "maxLength": TENANT_KEY_MAX, "pattern": TENANT_KEY_PATTERN},
            "description": "The product's key for the tenant (its customer organisation).",
            "example": "acme",
        },
        "token": {
            "schema": {"type": "string", "minLength": 1, "maxLength": DEVICE_TOKEN_MAX, "pattern": TOKEN_PATTERN},
            "description": "The phone's push token, as registered.",
        },
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


def _routes(app: Flask):
    """(path, method, URL variables, view, Doc) of every /v1 operation, in the url_map's order."""
    for rule in app.url_map.iter_rules():
        if rule.rule != "/v1" and not rule.rule.startswith("/v1/"):
            continue
        view = app.view_functions[rule.endpoint]
        doc: Doc | None = getattr(view, "openapi", None)
        if doc is None:
            raise LookupError(f"{rule.endpoint} ({rule.rule}) is a /v1 route without @documented")
        if doc.auth == "bearerAuth" and getattr(view, "required_scope", None) is None:
            raise LookupError(f"{rule.endpoint} ({rule.rule}) takes an API key but declares no @auth.requires")
        variables = re.findall(r"<(?:[^:<>]+:)?(\w+)>", rule.rule)  # Flask's <int:x> is OpenAPI's {x}
        path = re.sub(r"<(?:[^:<>]+:)?(\w+)>", r"{\1}", rule.rule)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            yield path, method.lower(), variables, view, doc


def _models(doc: Doc) -> set[type[BaseModel]]:
    return {
        m
        for model in doc.responses.values()
        for m in (model if isinstance(model, tuple) else (model,))
        if m is not None
    }


def _json(ref: dict) -> dict:
    return {"application/json": {"schema": ref}}


def _not_null(schema: dict) -> dict:
    """A query parameter's schema without pydantic's `null` branch (a parameter is left out, never null)."""
    branches = [b for b in schema.get("anyOf", ()) if b.get("type") != "null"]
    if len(branches) == 1:
        schema = {**{k: v for k, v in schema.items() if k != "anyOf"}, **branches[0]}
    if "default" in schema and schema["default"] is None:
        del schema["default"]
    return schema


def _query_parameters(model: type[BaseModel]) -> list[dict]:
    """The query model's fields as OpenAPI parameters (the same rules parse_query() checks)."""
    schema = model.model_json_schema(schema_generator=StrictKeysJsonSchema)
    required = set(schema.get("required", ()))
    parameters = []
    for name, field in schema["properties"].items():
        field = _not_null({k: v for k, v in field.items() if k != "title"})
        description = field.pop("description", None)
        parameter = {"name": name, "in": "query", "required": name in required, "schema": field}
        parameters.append({**parameter, "description": description} if description else parameter)
    return parameters


def _responses(doc: Doc, errors: set[int], idempotent: bool, refs: dict, body_limit: int | None) -> dict:
    responses = {}
    for status, model in doc.responses.items():
        response = {"description": "OK" if status < 300 else str(MESSAGES.get(status, ""))}
        if status == 101:
            response["description"] = "Switching Protocols: the WebSocket is open."
        if isinstance(model, tuple):
            response["content"] = _json({"oneOf": [refs[(m, "serialization")] for m in model]})
        elif model is not None:
            response["content"] = _json(refs[(model, "serialization")])
        if idempotent:
            response["headers"] = {
                "Idempotent-Replayed": {
                    "schema": {"type": "string", "enum": ["true"]},
                    "description": "Present on a replay.",
                }
            }
        responses[str(status)] = response
    problem = {PROBLEM: {"schema": refs[(answers.Problem, "serialization")]}}
    for status in sorted(errors):
        response = {"description": str(MESSAGES.get(status, "Error")), "content": problem}
        if status == 413 and body_limit is not None:
            response["description"] = too_large(body_limit)
        if status in (409, 429, 503):
            response["headers"] = {"Retry-After": HEADER_INT}
        if status == 429:
            response["headers"].update(
                {"RateLimit-Limit": HEADER_INT, "RateLimit-Remaining": HEADER_INT, "RateLimit-Reset": HEADER_INT}
            )
        responses[str(status)] = response
    return responses


def _operation(variables: list[str], view, doc: Doc, refs: dict, body_limit: int, path_parameters: dict) -> dict:
    body = getattr(view, "body_model", None)
    query = getattr(view, "query_model", None)
    idempotent = getattr(view, "takes_idempotency_key", False)
    errors = set(doc.errors) | set(AUTH_ERRORS[doc.auth])
    errors |= set(BODY_ERRORS if body else ()) | set(QUERY_ERRORS if query else ())
    errors |= set(IDEMPOTENCY_ERRORS if idempotent else ())
    spec = {
        "operationId": doc.operation_id,
        "summary": doc.summary,
        "tags": list(doc.tags),
        "responses": _responses(doc, errors, idempotent, refs, body_limit if body else None),
    }
    if doc.description:
        spec["description"] = doc.description
    parameters = [{"name": name, "in": "path", "required": True, **path_parameters[name]} for name in variables]
    parameters += _query_parameters(query) if query else []
    parameters += [IDEMPOTENCY_KEY] if idempotent else []
    if parameters:
        spec["parameters"] = parameters
    if body is not None:
        spec["requestBody"] = {
            "required": True,
            "description": f"JSON (UTF-8, at most 200 levels deep) of at most {body_limit:,} bytes "
            f"(the server's {body_limit_setting(view)}; more: 413).",
            "content": _json(refs[(body, "validation")]),
            "x-max-bytes": body_limit,
        }
    if doc.auth is None:
        spec["security"] = []
    elif doc.auth == "userToken":
        spec["security"] = [{"userToken": []}]
    else:
        # OpenAPI 3.1 lets a bearer requirement list role names: here, the key's scope.
        spec["security"] = [{"bearerAuth": [view.required_scope]}]
    return spec


def spec(app: Flask) -> dict:
    """Return the OpenAPI 3.1 document of app's /v1 routes, in English, stating the limits its config sets."""
    config = app.config
    built = app.extensions.setdefault("hato_openapi", {})  # one per state of the settings it states
    key = tuple(config[name] for name in STATED_SETTINGS)
    if key not in built:
        with app.app_context(), force_locale(LANGUAGES[0]):
            built[key] = _document(app)
    return built[key]


def _document(app: Flask) -> dict:
    config = app.config
    operations = list(_routes(app))
    inputs = {getattr(view, "body_model", None) for *_, view, _ in operations} - {None}
    outputs = {model for *_, doc in operations for model in _models(doc)} | {answers.Problem}
    models = [(m, "validation") for m in sorted(inputs, key=lambda m: m.__name__)]
    models += [(m, "serialization") for m in sorted(outputs, key=lambda m: m.__name__)]
    refs, definitions = models_json_schema(models, ref_template=REF, schema_generator=StrictKeysJsonSchema)
    paths: dict[str, dict] = {}
    path_parameters = _path_parameters()
    for path, method, variables, view, doc in operations:
        operation = _operation(variables, view, doc, refs, config[body_limit_setting(view)], path_parameters)
        paths.setdefault(path, {})[method] = operation
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Hato API",
            "version": "1",
            "description": "Notifications for product services. Errors are RFC 9457 problem documents. "
            f"Rate limit: {config['API_RATE_LIMIT']} per API key, and per member on /v1/feed (RateLimit-* "
            f"headers; more: 429). Request bodies: at most {config['API_MAX_BODY_BYTES']:,} bytes.",
        },
        "servers": [{"url": config["BASE_URL"]}],
        "security": [{"bearerAuth": []}],
        "paths": paths,
        "components": {
            "schemas": definitions.get("$defs", {}),
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key from `flask api-keys create NAME --scope …` or the console "
                    f"(at most {auth.MAX_KEY_CHARS} characters). "
                    "Each operation lists the scope its key needs; without it the answer is 403 with "
                    '`WWW-Authenticate: Bearer error="insufficient_scope"`. Scopes: '
                    + " ".join(f"`{name}`: {str(text)}" for name, text in SCOPES.items()),
                },
                "userToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": "A user token from POST /v1/user-tokens (or signed by the product's backend "
                    f"with its key's signing secret), at most {user_tokens.MAX_TOKEN_CHARS:,} characters. 401 with "
                    "`code: expired` means: fetch a new one.",
                },
            },
        },
    }
