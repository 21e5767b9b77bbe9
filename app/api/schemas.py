"""Request models of the JSON API and their validation (POST /v1/notifications's: notification_schemas.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from flask_babel import gettext, lazy_gettext
from pydantic import (
    AfterValidator,
    Strict,
    StrictBool,
    StrictFloat,
    StrictInt,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError
from typing_extensions import TypeAliasType

from app import limits
from app.links import SHAPE_PATTERN, same_site_path
from app.web.bodies import JsonBody, field_errors
from app.web.bodies import text as _text

# External ids also appear as a path segment: no slash, no control characters.
EXTERNAL_ID_PATTERN = r"^[^/\x00-\x1f\x7f]*$"
LOCALE_PATTERN = r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8}){0,3}$"
EMAIL_PATTERN = limits.EMAIL_PATTERN
SEND_AT_MAX_DAYS = 90
KEY_MAX = 200  # a group_key or cancellation_key
# RFC 3339 date-time: the zone designator is required (Z or ±hh:mm), so "10:00" is never read in a guessed zone.
SEND_AT_MESSAGE = lazy_gettext("must be an RFC 3339 date-time with an offset, such as 2026-12-01T09:00:00+09:00")
RFC3339_PATTERN = r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$"

LINK_MESSAGE = lazy_gettext("must be a relative path on this site, such as /orders/42")
TIMEZONE_MESSAGE = lazy_gettext("must be an IANA time zone name such as Europe/Paris")
PHONE_MESSAGE = lazy_gettext(
    "must be a mobile number such as +81 90 1234 5678 (or a national number of this server's region)"
)
# What a phone number is written with (full-width digits and the long-vowel dash too, as Japanese keyboards type
# them); whether the digits make a number phones use is the numbering plan's question, asked after (e164()).
PHONE_PATTERN = r"^\+?[0-9０-９ ()\-.ー－]{3,40}$"
RECIPIENTS_MESSAGE = lazy_gettext("send either recipients (a list) or recipient (one id)")
AUDIENCE_MESSAGE = lazy_gettext("send exactly one of recipients (a list), recipient (one id) or topic (a topic key)")
TOPIC_SEND_AT_MESSAGE = lazy_gettext("a notification to a topic is sent now: leave send_at out")
CHANNELS_REPEAT_MESSAGE = lazy_gettext("name each channel once")
ACTION_KIND_MESSAGE = lazy_gettext("give each action either a url or an action name, not both")
ACTION_REPEAT_MESSAGE = lazy_gettext("name each action once")
ACTIONS_NOW_MESSAGE = lazy_gettext(
    "action buttons go with notifications sent now to recipients: leave send_at and topic out"
)
ACTION_NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]*$"
PROPERTIES_MESSAGE = lazy_gettext("must be at most %(max)s bytes as JSON", max=limits.PROPERTIES_MAX_BYTES)

# Field messages are in the reader's language (Accept-Language); the field names they are filed under never
# change. Lazy: each is translated when a problem document is written (field_errors). By pattern, or by the
# error type Hato's own validators raise (PydanticCustomError).
MESSAGES = {
    **JsonBody.messages,
    EXTERNAL_ID_PATTERN: lazy_gettext("must not contain '/' or control characters"),
    SHAPE_PATTERN: LINK_MESSAGE,
    LOCALE_PATTERN: lazy_gettext("must be a language tag such as en or ja-JP"),
    EMAIL_PATTERN: lazy_gettext("must be an e-mail address such as ann@example.com"),
    RFC3339_PATTERN: SEND_AT_MESSAGE,
    "link": LINK_MESSAGE,
    "timezone": TIMEZONE_MESSAGE,
    PHONE_PATTERN: PHONE_MESSAGE,
    "recipients": RECIPIENTS_MESSAGE,
    "audience": AUDIENCE_MESSAGE,
    "topic_send_at": TOPIC_SEND_AT_MESSAGE,
    "channels": CHANNELS_REPEAT_MESSAGE,
    "action_kind": ACTION_KIND_MESSAGE,
    ACTION_NAME_PATTERN: lazy_gettext(
        "must be a short name of lower-case letters, digits, '.', '_' or '-', such as approve"
    ),
}

MAX_RECIPIENTS = 1000
MAX_EXCLUDED = 1000  # as many as recipients (a body of the common API_MAX_BODY_BYTES holds them)
TOPIC_KEY_MAX = 200


def _same_site_link(value: str) -> str:
    # The pattern is the rule's shape; app/links.py also judges what percent-decoding would make of it.
    if same_site_path(value) is None:
        raise PydanticCustomError("link", str(LINK_MESSAGE))
    return value


def parse_send_at(value: str) -> datetime:
    """The moment an RFC 3339 send_at names; 422 naming the field if it is no real time or too far ahead.

    The pattern (the spec's shape) is checked with the body; the calendar and the 90 days here, as the
    request's own rule (a schema-shaped "2026-02-31T…" is refused as a time, not as malformed JSON).
    """
    # Python's parser takes at most 6 fraction digits; RFC 3339 allows more, below its resolution anyway.
    head, dot, rest = value.upper().partition(".")
    if dot:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        rest = rest[:digits][:6] + rest[digits:]
    try:
        moment = datetime.fromisoformat(head + dot + rest)
        too_far = moment - datetime.now(UTC) > timedelta(days=SEND_AT_MAX_DAYS)
    except (ValueError, OverflowError):
        raise ApiError(
            422,
            gettext("send_at is not a real date and time."),
            errors=[{"field": "send_at", "message": str(SEND_AT_MESSAGE)}],
        ) from None
    if too_far:
        message = gettext("must be at most %(days)d days ahead", days=SEND_AT_MAX_DAYS)
        raise ApiError(
            422,
            gettext("send_at is more than %(days)d days ahead.", days=SEND_AT_MAX_DAYS),
            errors=[{"field": "send_at", "message": message}],
        )
    return moment


SendAt = Annotated[
    str,
    Strict(),
    StringConstraints(pattern=RFC3339_PATTERN),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": RFC3339_PATTERN}),
]
Key = _text(1, KEY_MAX)

ExternalId = _text(1, limits.EXTERNAL_ID_MAX, EXTERNAL_ID_PATTERN)
TopicKey = _text(1, TOPIC_KEY_MAX, EXTERNAL_ID_PATTERN)  # a path segment too, such as project:42
Link = Annotated[_text(1, limits.LINK_MAX, SHAPE_PATTERN), AfterValidator(_same_site_link)]
Locale = _text(2, limits.LOCALE_MAX, LOCALE_PATTERN)
EmailAddress = _text(3, limits.EMAIL_MAX, EMAIL_PATTERN)
PhoneNumber = _text(3, 40, PHONE_PATTERN)
DataKey = _text(1, limits.DATA_KEY_MAX)

# Strict scalars: in lax mode "007" would quietly become the integer 7.
JsonValue = TypeAliasType(
    "JsonValue",
    Annotated[_text(0, limits.DATA_TEXT_MAX), Strict()]
    | StrictInt
    | StrictFloat
    | StrictBool
    | None
    | list["JsonValue"]
    | dict[DataKey, "JsonValue"],
)


class ApiIn(JsonBody):
    """A request body of the JSON API: its field errors worded by MESSAGES."""

    messages = MESSAGES


class ApiError(Exception):
    """An error the API answers with a problem document (status, a sentence, extra members).

    detail (and a title in extra) is a sentence for people, in the request's language (gettext when raised,
    or lazy); type, status, scope and the errors' field names are for programs and never translated.
    """

    def __init__(self, status: int, detail: str, headers: dict | None = None, **extra) -> None:
        super().__init__(detail)
        self.status, self.detail, self.headers, self.extra = status, detail, headers or {}, extra


def path_value(field: str, annotation, value: str, detail):
    """Check one URL segment with the rules the same field has in a body (422 naming it otherwise)."""
    try:
        return TypeAdapter(annotation).validate_python(value)
    except ValidationError as exc:
        errors = [{**error, "field": field} for error in field_errors(exc, MESSAGES)]
        raise ApiError(422, str(detail), errors=errors) from None


def validate_path_id(value: str) -> str:
    """Check an external id taken from the URL with the same rules as in a body (422 otherwise)."""
    return path_value("external_id", ExternalId, value, lazy_gettext("The external id in the URL is invalid."))


def validate_topic_key(value: str) -> str:
    """Check a topic key taken from the URL with the body's rules (422 otherwise)."""
    return path_value("topic_key", TopicKey, value, lazy_gettext("The topic key in the URL is invalid."))


def validate_cancellation_key(value: str) -> str:
    """Check a cancellation key taken from the URL with the body's rules (422 otherwise)."""
    return path_value("cancellation_key", Key, value, lazy_gettext("The cancellation key in the URL is invalid."))
