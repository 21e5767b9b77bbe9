"""What the feed takes and answers: its views validate and serialize with these; the OpenAPI document reads them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from flask import current_app
from flask_babel import lazy_gettext
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool
from pydantic_core import PydanticCustomError

from app.delivery.channels import member_channels
from app.inbox.bulk import ACTIONS, ALL_FILTERS
from app.inbox.queries import FILTERS
from app.inbox.snooze import CHOICES, MAX_DAYS
from app.web.bodies import JsonBody, absent_by_default, text

PAGE_LIMIT_MAX = 50
CURSOR_MAX = 200
# What <input type="datetime-local"> sends (seconds optional), or a date alone (its first minute).
LOCAL_TIME_PATTERN = r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?)?$"


class FeedPageQuery(JsonBody):
    """GET /v1/feed: which list, where it continues, how many rows."""

    filter: Literal[tuple(FILTERS)] = "all"
    cursor: text(1, CURSOR_MAX) | None = Field(None, description="The `next_cursor` of the page before.")
    limit: int = Field(20, ge=1, le=PAGE_LIMIT_MAX, description="Rows per page.")


class SnoozeIn(JsonBody):
    """POST /v1/feed/notifications/{notification_id}/snooze: a menu choice, or a time to sleep until."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [{"required": ["choice"]}, {"required": ["until"]}],
            "examples": [{"choice": "tomorrow"}, {"until": "2026-12-01T09:00"}],
        }
    )
    messages = {
        **JsonBody.messages,
        LOCAL_TIME_PATTERN: lazy_gettext("must be a local date and time such as 2026-12-01T09:00"),
    }

    choice: Literal[tuple(CHOICES)] = Field(
        None, description="A menu choice (it wins over `until`).", json_schema_extra=absent_by_default
    )
    until: text(10, 19, LOCAL_TIME_PATTERN) = Field(
        None,
        description=f"A date-time in the member's time zone, in the future and at most {MAX_DAYS} days ahead.",
        json_schema_extra=absent_by_default,
    )


def _json_integer(value):
    """A JSON integer as JSON Schema has it (5 and 5.0, never "5" or true); pydantic's lax int does the rest."""
    if isinstance(value, (str, bool)):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


JsonId = Annotated[int, Field(ge=1, le=2**63 - 1), BeforeValidator(_json_integer)]


class StatedMaxItems:
    """A list's longest length as a setting, stated by the OpenAPI document (the view refuses more, with a 422 that
    names the setting's value)."""

    def __init__(self, setting: str) -> None:
        self.setting = setting

    def __get_pydantic_json_schema__(self, schema, handler):
        return {**handler(schema), "maxItems": current_app.config[self.setting]}


class BulkIn(JsonBody):
    """POST /v1/feed/bulk: one action on the member's rows among `ids`, or on a whole list (`all`)."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [{"required": ["ids"]}, {"required": ["all"]}],
            "examples": [{"action": "archive", "ids": [12, 15]}, {"action": "delete", "all": True}],
        }
    )

    action: Literal[tuple(ACTIONS)] = Field(description="`delete` hides the rows from the member at once (see Undo).")
    ids: Annotated[list[JsonId], StatedMaxItems("INBOX_BULK_MAX_IDS")] = Field(
        None,
        description="The member's notification ids (at most INBOX_BULK_MAX_IDS, 200 by default: more is a 422). "
        "Ids that are not the member's (or, with a tenant-scoped token, not that tenant's) are ignored.",
        json_schema_extra=absent_by_default,
    )
    all: Literal[True] = Field(
        None,
        description="Every row of `filter`: read all, archive all, or delete all *read* rows.",
        json_schema_extra=absent_by_default,
    )
    filter: Literal[tuple(ALL_FILTERS)] = Field("all", description="The list `all` acts on.")


class UndoIn(JsonBody):
    """POST /v1/feed/undo: the token a bulk answer gave."""

    token: text(1, 64)


class FeedPreferenceIn(JsonBody):
    """PUT /v1/feed/preferences: turn one (type, channel) on or off."""

    type: text(1, 100)
    channel: Literal[tuple(c.name for c in member_channels())]
    enabled: StrictBool


class FeedCountsOut(BaseModel):
    unread: int
    unseen: int
    badge: int = Field(description="The one the server's BADGE_COUNTS shows.")


class FeedActionOut(BaseModel):
    """An action button (issue 33): a link (url) or a named action (name), closed once clicked or answered."""

    label: str = Field(description="In the member's locale.")
    url: str | None = Field(None, description="A link button's absolute URL on the product's site.")
    name: str | None = Field(None, description="A named action: POST /v1/feed/notifications/{id}/actions/{name}.")
    state: str | None = Field(None, description="What the product answered (PATCH …/actions/{name}), such as Approved.")
    clicked: bool = Field(False, description="Sent; the product has not answered yet.")


class FeedNotificationOut(BaseModel):
    id: int
    type: str
    title: str
    body: str | None
    link: str | None
    unread: bool
    seen: bool
    read_at: datetime | None
    archived_at: datetime | None
    snoozed_until: datetime | None
    created_at: datetime
    mutable: bool
    muted: bool
    actions: list[FeedActionOut] = Field(default_factory=list, description="Its action buttons (at most two).")


LOCALES_HELP = (
    "The operator's own variants per locale tag (lower case: `ja`, `pt-br`), only the fields they filled in. "
    "The fields above are already in the member's locale: their saved locale, then its language, then the "
    "request's Accept-Language, then DEFAULT_LOCALE, field by field, else the base text."
)


class AnnouncementTextOut(BaseModel):
    """An announcement's words in one locale (a field left empty there falls back)."""

    title: str | None = None
    body: str | None = None


class FeedAnnouncementOut(BaseModel):
    id: int
    title: str = Field(description="In the member's locale (see `locales`).")
    body: str = Field(description="In the member's locale, in `body_format`.")
    body_format: str
    unread: bool
    seen: bool
    published_at: datetime | None
    locales: dict[str, AnnouncementTextOut] = Field(description=LOCALES_HELP)


class FeedTenantOut(BaseModel):
    """The branding of the tenant a scoped token names (issue 32), for the bell's popover."""

    key: str
    name: str
    logo_url: str | None = Field(description="The tenant's stored https logo, or null (none, or it breaks the rules).")
    primary_color: str | None = Field(description="`#rrggbb`, or null.")


class FeedPageOut(BaseModel):
    notifications: list[FeedNotificationOut]
    announcements: list[FeedAnnouncementOut] = Field(description="Active announcements, on the first page only.")
    next_cursor: str | None
    counts: FeedCountsOut
    tenant: FeedTenantOut | None = Field(
        None, description="The branding of the token's tenant (its `tenant` claim); null for an unscoped token."
    )


class FeedChangeOut(BaseModel):
    counts: FeedCountsOut
    notification: FeedNotificationOut | None = None
    changed: bool | None = None


class TypeTextOut(BaseModel):
    """A notification type's words in one locale (a field left empty there falls back)."""

    label: str | None = None
    description: str | None = None


class FeedUndoOut(BaseModel):
    token: str = Field(description="POST it to /v1/feed/undo within `expires_in` seconds to put the rows back.")
    expires_in: int


class FeedBulkOut(BaseModel):
    action: str
    changed: int = Field(description="How many rows changed (rows already in that state are left alone).")
    ids: list[int] = Field(description="The ids that changed.")
    undo: FeedUndoOut | None = Field(description="null when nothing changed.")
    counts: FeedCountsOut


class FeedUndoneOut(BaseModel):
    restored: int = Field(description="How many rows came back (those changed since stay as they are).")
    counts: FeedCountsOut


class FeedPreferenceOut(BaseModel):
    type: str
    label: str = Field(description="In the member's locale (see `locales`).")
    description: str | None = Field(description="In the member's locale (see `locales`).")
    locales: dict[str, TypeTextOut] = Field(description=LOCALES_HELP)
    mandatory: bool = Field(description="Mandatory types cannot be changed (422).")
    channels: dict[str, bool]


class FeedPreferencesOut(BaseModel):
    types: list[FeedPreferenceOut]
