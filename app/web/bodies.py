"""What a JSON endpoint reads (the API, the feed, the provider hooks): one body-size guard, and input into pydantic.

A blueprint calls limit_body(its limit) before anything reads the body, and registers refused() for BadInput;
its views read with read_body(), or take a model with @takes_json / @takes_query (which also tell the OpenAPI
document what they read). Broken rules become problem+json that names each field, in the reader's language
(Accept-Language): pydantic's errors in pydantic's own English words, or a model's own sentence for its
patterns and custom error types (JsonBody.messages).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from functools import wraps
from typing import Annotated, ClassVar, TypeVar

from flask import Response, request
from flask_babel import LazyString, gettext, lazy_gettext, ngettext
from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints, ValidationError
from pydantic_core import PydanticCustomError

from app import timezones
from app.web.errors import problem

# PostgreSQL text cannot hold NUL, so it is refused at the edge rather than failing in the database.
NO_NUL = r"^[^\x00]*$"
INVALID_FIELDS = lazy_gettext("Some fields are missing or invalid.")


def text(min_length: int, max_length: int, pattern: str = NO_NUL):
    """A string field of min_length to max_length characters matching pattern (by default: anything but NUL)."""
    return Annotated[str, StringConstraints(min_length=min_length, max_length=max_length, pattern=pattern)]


def absent_by_default(schema: dict) -> None:
    """json_schema_extra of a field that may be left out but not sent as null: no `"default": null` in the spec."""
    schema.pop("default", None)


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(timezones.choices())


def _known_timezone(value: str) -> str:
    if value not in _zone_names():
        raise PydanticCustomError("timezone", "must be an IANA time zone name")  # worded by messages["timezone"]
    return value


class _TimezoneJsonSchema:
    """The spec lists the same zone names the validator accepts."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema, handler):
        return {"type": "string", "enum": list(timezones.choices())}


# An IANA time zone name this server knows (error type "timezone": a body's messages word it).
Timezone = Annotated[str, AfterValidator(_known_timezone), _TimezoneJsonSchema]


class JsonBody(BaseModel):
    """A JSON request body: unknown fields and NaN/Infinity refused.

    messages says what the model's own rules say when broken, by pattern or by custom error type (lazy: translated
    when the problem document is written); a subclass extends it.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    messages: ClassVar[Mapping[str, LazyString]] = {NO_NUL: lazy_gettext("must not contain NUL characters")}


class BadInput(Exception):
    """Input an endpoint will not take: the status (400, 413, 415, 422), a sentence, and the fields at fault."""

    def __init__(self, status: int, detail, errors: list[dict] | None = None) -> None:
        super().__init__(str(detail))
        self.status, self.detail, self.errors = status, detail, errors


def refused(error: BadInput) -> Response:
    """The problem document of a BadInput (each JSON blueprint registers this as its handler)."""
    return problem(error.status, str(error.detail), **({"errors": error.errors} if error.errors is not None else {}))


# --- the size guard ---------------------------------------------------------------------------------


def too_large(limit: int) -> str:
    """The 413 sentence (the limit in bytes, grouped as the reader's language groups numbers)."""
    return ngettext("The body is larger than %(num)d byte.", "The body is larger than %(num)d bytes.", limit)


def limit_body(limit: int) -> None:
    """Refuse a body declared larger than limit bytes before it is read (413); read_body() checks the rest."""
    # Werkzeug silently truncates a chunked body at the limit; one byte more shows it was too long.
    request.max_content_length = limit + 1
    request.hato_body_limit = limit  # per request, never per app context (g)
    if (request.content_length or 0) > limit:
        raise BadInput(413, too_large(limit))


def read_body() -> bytes:
    """The request's body, at most the limit_body() limit (413 past it)."""
    limit = request.hato_body_limit  # AttributeError: the blueprint never called limit_body()
    raw = request.get_data()
    if len(raw) > limit:
        raise BadInput(413, too_large(limit))
    return raw


# --- pydantic errors, in the reader's language --------------------------------------------------------


def _list_length(at_least: bool):
    def message(ctx: dict) -> str:
        if ctx.get("field_type") != "List":
            raise KeyError("field_type")  # another container: pydantic's own words
        if at_least:
            return ngettext(
                "List should have at least %(num)d item after validation, not %(actual)d",
                "List should have at least %(num)d items after validation, not %(actual)d",
                int(ctx["min_length"]),
                actual=int(ctx["actual_length"]),
            )
        return ngettext(
            "List should have at most %(num)d item after validation, not %(actual)d",
            "List should have at most %(num)d items after validation, not %(actual)d",
            int(ctx["max_length"]),
            actual=int(ctx["actual_length"]),
        )

    return message


# pydantic's own messages for the errors a request can produce, in the same English words; any other error keeps
# pydantic's English. Each takes the error's ctx.
PYDANTIC_MESSAGES = {
    "missing": lambda ctx: gettext("Field required"),
    "extra_forbidden": lambda ctx: gettext("Extra inputs are not permitted"),
    "string_type": lambda ctx: gettext("Input should be a valid string"),
    "int_type": lambda ctx: gettext("Input should be a valid integer"),
    "int_parsing": lambda ctx: gettext("Input should be a valid integer, unable to parse string as an integer"),
    "bool_type": lambda ctx: gettext("Input should be a valid boolean"),
    "list_type": lambda ctx: gettext("Input should be a valid list"),
    "dict_type": lambda ctx: gettext("Input should be an object"),
    "model_type": lambda ctx: gettext("Input should be an object"),
    "finite_number": lambda ctx: gettext("Input should be a finite number"),
    "greater_than_equal": lambda ctx: gettext("Input should be greater than or equal to %(ge)s", ge=ctx["ge"]),
    "less_than_equal": lambda ctx: gettext("Input should be less than or equal to %(le)s", le=ctx["le"]),
    # ctx's expected is "'a', 'b' or 'c'": listed with commas, so no English "or" lands in another language.
    "literal_error": lambda ctx: gettext(
        "Input should be one of %(expected)s", expected=ctx["expected"].replace(" or ", ", ")
    ),
    "string_too_short": lambda ctx: ngettext(
        "String should have at least %(num)d character",
        "String should have at least %(num)d characters",
        int(ctx["min_length"]),
    ),
    "string_too_long": lambda ctx: ngettext(
        "String should have at most %(num)d character",
        "String should have at most %(num)d characters",
        int(ctx["max_length"]),
    ),
    "too_short": _list_length(at_least=True),
    "too_long": _list_length(at_least=False),
}


def _message(error: dict, messages: Mapping[str, LazyString]) -> str:
    ctx = error.get("ctx") or {}
    if (pattern := ctx.get("pattern")) in messages:
        return str(messages[pattern])
    if error["type"] in messages:
        return str(messages[error["type"]])
    if (translate := PYDANTIC_MESSAGES.get(error["type"])) is not None:
        try:
            return translate(ctx)
        except (KeyError, TypeError, ValueError):  # a ctx this version of pydantic shapes differently
            return error["msg"]
    return error["msg"]


# pydantic names the branch of a union (JsonValue) in the error location; people want the path only.
_UNION_BRANCHES = {"constrained-str", "str", "int", "float", "bool", "none"}


def _is_branch(part) -> bool:
    return isinstance(part, str) and (part in _UNION_BRANCHES or part.startswith(("list[", "dict[", "nullable[")))


def field_errors(exc: ValidationError, messages: Mapping[str, LazyString] = JsonBody.messages) -> list[dict]:
    """Turn pydantic errors into [{field, message}] with dotted field paths, one per field."""
    raw = exc.errors(include_url=False, include_input=False)
    # When a value matched no branch of a union, the branches whose *type* fit explain the problem.
    specific = [e for e in raw if not (e["type"].endswith("_type") and any(_is_branch(p) for p in e["loc"]))]
    errors: dict[str, str] = {}
    for error in specific or raw:
        path = [str(part) for part in error["loc"] if not _is_branch(part)]
        field = ".".join(path) or (error.get("ctx") or {}).get("field", "body")
        errors.setdefault(field, _message(error, messages))
    return [{"field": field, "message": message} for field, message in errors.items()]


# --- reading input into a model -----------------------------------------------------------------------

M = TypeVar("M", bound=BaseModel)


def parse_json(model: type[M]) -> M:
    """Validate the JSON body as model: 415 another type, 413 too large, 400 empty or malformed, 422 naming fields."""
    if request.mimetype != "application/json":
        raise BadInput(415, gettext("Send the body as JSON with Content-Type: application/json."))
    raw = read_body()
    if not raw.strip():
        raise BadInput(400, gettext("The request body is empty; send a JSON object."))
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        if any(error["type"] == "json_invalid" for error in exc.errors()):
            raise BadInput(400, gettext("The body is not valid JSON (UTF-8, at most 200 levels deep).")) from None
        raise BadInput(422, str(INVALID_FIELDS), field_errors(exc, _messages(model))) from None


def parse_query(model: type[M]) -> M:
    """Validate the query string as model (a repeated parameter counts once): 422 naming the failing ones."""
    try:
        return model.model_validate(request.args.to_dict())
    except ValidationError as exc:
        raise BadInput(422, str(INVALID_FIELDS), field_errors(exc, _messages(model))) from None


def _messages(model: type[BaseModel]) -> Mapping[str, LazyString]:
    return getattr(model, "messages", JsonBody.messages)


def _passes(parse, argument: str, marker: str, model: type[BaseModel]):
    def decorate(view):
        @wraps(view)
        def wrapped(*args, **kwargs):
            return view(*args, **kwargs, **{argument: parse(model)})

        setattr(wrapped, marker, model)
        return wrapped

    return decorate


def takes_json(model: type[BaseModel]):
    """Parse the JSON body as model and pass it to the view as `payload` (the OpenAPI document reads body_model)."""
    return _passes(parse_json, "payload", "body_model", model)


def takes_query(model: type[BaseModel]):
    """Parse the query string as model and pass it to the view as `query` (the OpenAPI document reads query_model)."""
    return _passes(parse_query, "query", "query_model", model)
