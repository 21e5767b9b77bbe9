"""The request models of POST /v1/notifications (NotificationIn) and its parts: the actor, action buttons."""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from flask_babel import gettext, lazy_gettext
from pydantic import ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from app import limits
from app.api.schemas import (
    ACTION_KIND_MESSAGE,
    ACTION_NAME_PATTERN,
    ACTION_REPEAT_MESSAGE,
    ACTIONS_NOW_MESSAGE,
    AUDIENCE_MESSAGE,
    CHANNELS_REPEAT_MESSAGE,
    KEY_MAX,
    MAX_EXCLUDED,
    MAX_RECIPIENTS,
    RECIPIENTS_MESSAGE,
    SEND_AT_MAX_DAYS,
    TOPIC_SEND_AT_MESSAGE,
    ApiError,
    ApiIn,
    DataKey,
    ExternalId,
    JsonValue,
    Key,
    Link,
    Locale,
    SendAt,
    TopicKey,
    path_value,
)
from app.delivery.channels import member_channels
from app.web.bodies import absent_by_default
from app.web.bodies import text as _text


def _unique_items(schema: dict) -> None:
    """json_schema_extra of `channels`: each name at most once (the server refuses a repeat), never null."""
    absent_by_default(schema)
    schema["uniqueItems"] = True


def member_channel_names() -> tuple[str, ...]:
    """Every channel a request may name (the registry's, app/delivery/channels), in order."""
    return tuple(channel.name for channel in member_channels())


MemberChannel = Literal[member_channel_names()]


class Actor(ApiIn):
    """Who caused an event (aggregated rows list the distinct actors: "Alice and 3 others")."""

    id: _text(1, KEY_MAX) = Field(description="The product's id of the actor.")
    name: _text(1, limits.TITLE_MAX) = Field(description="The name shown in the notification.")


ActionLabel = _text(1, limits.ACTION_LABEL_MAX)
ActionName = _text(1, limits.ACTION_NAME_MAX, ACTION_NAME_PATTERN)


class ActionIn(ApiIn):
    """An action button: a link on the product's site ({label, url}) or a named action ({label, action})."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [{"required": ["url"]}, {"required": ["action"]}],
            "examples": [{"label": "Approve", "labels": {"ja": "承認"}, "action": "approve"}],
        }
    )

    label: ActionLabel = Field(description="The button's text in the default locale.")
    labels: Annotated[dict[Locale, ActionLabel], Field(max_length=20)] = Field(
        None,
        description='The label per locale, such as {"ja": "承認"}: each member sees the one of their locale, '
        "else of its language, else `label` (the fallback message templates follow).",
        json_schema_extra=absent_by_default,
    )
    url: Link = Field(
        None,
        description="A relative path in the product, such as /orders/42 (the same rule as `link`).",
        json_schema_extra=absent_by_default,
    )
    action: ActionName = Field(
        None,
        description="A named action, such as approve: a click (in the inbox, the bell, an e-mail or a push) sends "
        "the webhook event `notification.action` once, marks the notification read, and the button shows the "
        "state the product answers with PATCH /v1/notifications/{id}/actions/{name}.",
        json_schema_extra=absent_by_default,
    )

    @model_validator(mode="after")
    def _url_or_action(self) -> ActionIn:
        if (self.url is None) == (self.action is None):
            raise PydanticCustomError("action_kind", str(ACTION_KIND_MESSAGE), {"field": "action"})
        return self

    def stored(self) -> dict:
        """The button as notifications.actions keeps it (locale tags lower-case with '-', as templates')."""
        button = self.model_dump(exclude_none=True)
        if self.labels:
            button["labels"] = {tag.replace("_", "-").lower(): text for tag, text in self.labels.items()}
        return button


class ActionStateIn(ApiIn):
    """PATCH /v1/notifications/{id}/actions/{name}: the product's answer to a named action."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"state": "Approved"}]})

    state: _text(1, limits.ACTION_STATE_MAX) = Field(
        description="What the button shows from now on, such as Approved (in the member's language: the "
        "`notification.action` event names their `locale`)."
    )


def validate_action_name(value: str) -> str:
    """Check an action name taken from the URL with the body's rules (422 otherwise)."""
    return path_value("action_name", ActionName, value, lazy_gettext("The action name in the URL is invalid."))


class NotificationIn(ApiIn):
    """POST /v1/notifications: one notification for each recipient."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [{"required": ["recipients"]}, {"required": ["recipient"]}, {"required": ["topic"]}],
            "not": {"required": ["topic", "send_at"]},  # a topic's fanout starts now
            # action buttons go with a notification sent now to recipients
            "allOf": [{"not": {"required": ["actions", "topic"]}}, {"not": {"required": ["actions", "send_at"]}}],
            "examples": [
                {
                    "type": "comment",
                    "recipient": "user-42",
                    "title": "Ann replied to your post",
                    "body": "Great idea!",
                    "link": "/posts/7#c12",
                    "data": {"post_id": 7},
                    "dedupe_key": "comment:12",
                }
            ],
        }
    )

    type: _text(1, 100) = Field(description="A notification type defined in the console.")
    recipients: Annotated[list[ExternalId], Field(min_length=1, max_length=MAX_RECIPIENTS)] = Field(
        None,
        description="External ids of the recipients (1-1,000); or use `recipient`.",
        json_schema_extra=absent_by_default,
    )
    recipient: ExternalId = Field(
        None, description="One external id; or use `recipients`.", json_schema_extra=absent_by_default
    )
    topic: TopicKey = Field(
        None,
        description="A topic's key: every follower of the topic (PUT /v1/topics/{key}), fanned out by a job in "
        "batches; the answer is a TopicNotificationAccepted with the fanout to poll. Instead of `recipients`.",
        json_schema_extra=absent_by_default,
    )
    exclude: Annotated[list[ExternalId], Field(max_length=MAX_EXCLUDED)] = Field(
        None,
        description="External ids left out (at most 1,000), such as whoever caused the event.",
        json_schema_extra=absent_by_default,
    )
    title: _text(1, limits.TITLE_MAX)
    body: _text(0, limits.NOTIFICATION_BODY_MAX) = ""
    link: Link | None = Field(None, description="A relative path in the product, such as /orders/42.")
    data: dict[DataKey, JsonValue] = Field(default_factory=dict, description="Values for the templates.")
    dedupe_key: _text(1, limits.DEDUPE_KEY_MAX) | None = Field(
        None,
        description="Same key for the same recipient = the same notification (a repeat is not an error). "
        "Defaults to a hash of type, title, body, link and data: send your own (e.g. comment:123) when "
        "the same wording may legitimately be sent again.",
    )
    send_at: SendAt = Field(
        None,
        description=f"When to send (RFC 3339 with an offset, at most {SEND_AT_MAX_DAYS} days ahead). Until "
        "then nothing is visible, counted or delivered; left out or in the past: now. A scheduled request "
        "answers 202 with status `scheduled`.",
        json_schema_extra=absent_by_default,
    )
    cancellation_key: Key = Field(
        None,
        description="DELETE /v1/cancellations/{key} cancels what has not happened yet of every notification "
        "this API key sent with this key (scheduled rows, pending e-mail/push, escalations).",
        json_schema_extra=absent_by_default,
    )
    group_key: Key = Field(
        None,
        description="The thread this notification belongs to, such as post:123. A user who muted the "
        "thread gets it stored read and hidden, with no e-mail or push (mandatory types excepted).",
        json_schema_extra=absent_by_default,
    )
    actor: Actor = Field(
        None,
        description="Who caused the event: {id, name}. For a type with an aggregation "
        "window, events with the same group_key collapse into one notification naming the first actors and their "
        "number. A notification to a `topic` leaves the actor's id out (nobody is notified of their own comment).",
        json_schema_extra=absent_by_default,
    )
    channels: Annotated[list[MemberChannel], Field(min_length=1, max_length=len(member_channel_names()))] = Field(
        None,
        description='The channels to send on, in priority order, such as ["push", "sms", "email"]; left out: '
        "the type's order (set in the console). In-app is recorded as the type and the recipient's preference "
        "say, listed or not.",
        json_schema_extra=_unique_items,
    )
    channel_mode: Literal["all", "first"] = Field(
        None,
        description="all: every listed channel the recipient has on. first: only the first channel that "
        "reaches the recipient (on in their preferences, a target such as an address or a device, nothing "
        "suppressed, the provider accepts); a permanent failure, a missing target or an opt-out moves on to "
        "the next, a transient failure retries until its retries or DELIVERY_MAX_AGE run out, then moves on. "
        "Left out: the type's mode.",
        json_schema_extra=absent_by_default,
    )

    actions: Annotated[list[ActionIn], Field(min_length=1, max_length=limits.ACTIONS_MAX)] = Field(
        None,
        description=f"Up to {limits.ACTIONS_MAX} action buttons, shown in the inbox, the bell, e-mails and pushes "
        "(Web Push `actions`, an APNs category HATO_ACTIONS_1 or HATO_ACTIONS_2, FCM `click_action`). Only for a "
        "notification sent now to `recipient(s)` (not with `send_at` or `topic`).",
        json_schema_extra=absent_by_default,
    )

    @model_validator(mode="after")
    def _one_recipient_field(self) -> NotificationIn:
        named = sum(value is not None for value in (self.recipients, self.recipient, self.topic))
        if named != 1 and self.topic is not None:
            raise PydanticCustomError("audience", str(AUDIENCE_MESSAGE), {"field": "topic"})
        if named != 1:
            raise PydanticCustomError("recipients", str(RECIPIENTS_MESSAGE), {"field": "recipients"})
        if self.topic is not None and self.send_at is not None:
            raise PydanticCustomError("topic_send_at", str(TOPIC_SEND_AT_MESSAGE), {"field": "send_at"})
        if self.channels is not None and len(set(self.channels)) != len(self.channels):
            raise PydanticCustomError("channels", str(CHANNELS_REPEAT_MESSAGE), {"field": "channels"})
        return self

    def stored_actions(self) -> list[dict] | None:
        """The buttons as notifications.actions keeps them (None: none); a business 422 for what the schema
        cannot say (a name twice) or only says as `not` (with a topic or send_at)."""
        if self.actions is None:
            return None
        names = [a.action for a in self.actions if a.action is not None]
        message = None
        if len(set(names)) != len(names):
            message = ACTION_REPEAT_MESSAGE
        elif self.topic is not None or self.send_at is not None:
            message = ACTIONS_NOW_MESSAGE
        if message is not None:
            errors = [{"field": "actions", "message": str(message)}]
            raise ApiError(422, gettext("These action buttons cannot be sent."), errors=errors)
        return [a.stored() for a in self.actions]

    tenant: _text(1, limits.TENANT_KEY_MAX) = Field(
        None,
        description="The key of the tenant (the product's customer organisation) this notification is for: every "
        "recipient must be its member (else 422 naming them, and nothing is written). Its default preferences apply, "
        "its branding marks the e-mails, and feeds scoped to it show the notification.",
        json_schema_extra=absent_by_default,
    )

    def route(self) -> list[str] | None:
        """The delivery channels in order (in-app is not routed: the type and the preference decide it)."""
        return None if self.channels is None else [name for name in self.channels if name != "in_app"]

    def recipient_ids(self) -> list[str]:
        """The recipients as a list, in the order sent, without the excluded ones."""
        refs = self.recipients if self.recipients is not None else [self.recipient]
        left_out = set(self.exclude or ())
        return [ref for ref in refs if ref not in left_out] if left_out else refs

    def actor_id(self) -> str | None:
        """The actor's external id (None: no actor)."""
        return self.actor.id if self.actor is not None else None

    def aggregation_actor(self) -> dict | None:
        """The actor as aggregation lists it ({id, name})."""
        return self.actor.model_dump() if self.actor is not None else None

    def left_out(self) -> list[str]:
        """A topic's followers not notified: the excluded ids and the actor."""
        return [*(self.exclude or ()), *([self.actor_id()] if self.actor_id() is not None else [])]

    def effective_dedupe_key(self) -> str:
        """The dedupe key sent, or one derived from the content (so a retried request is not doubled)."""
        if self.dedupe_key is not None:
            return self.dedupe_key
        # The actor counts only when sent, so keys derived before actors existed stay the same.
        fields = {"type", "title", "body", "link", "data"} | ({"actor"} if self.actor is not None else set())
        fields |= {"tenant"} if self.tenant is not None else set()  # likewise
        fields |= {"topic"} if self.topic is not None else set()
        fields |= {"actions"} if self.actions is not None else set()
        content = self.model_dump_json(include=fields)
        return "auto:" + hashlib.sha256(content.encode()).hexdigest()[:32]
