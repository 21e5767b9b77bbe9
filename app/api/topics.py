"""The API's topics: PUT/DELETE /v1/topics/<key>, POST/GET …/subscribers, GET /v1/users/<id>/topics,
GET /v1/fanouts/<id> (a topic notification's progress).

app/api/views.py adds ROUTES to the API blueprint, so they share its key check, rate limit, body limit and problem
documents; POST /v1/notifications with `topic` is there too (create_topic_fanout below does its part).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Literal

from flask import current_app, url_for
from flask_babel import gettext, lazy_gettext, ngettext
from pydantic import BaseModel, Field

from app.api import auth, notification_schemas, schemas
from app.api.idempotency import idempotent, json_response, store
from app.api.schemas import ApiError, ExternalId
from app.pagination import parse_id_cursor
from app.topics import queries, service
from app.unitofwork import commit
from app.users import export
from app.web import bodies
from app.web.bodies import JsonBody, text
from app.web.documented import documented

TAGS = ("topics",)
PAGE_MAX = 1000
DESCRIPTION_MAX = 2000


class TopicIn(JsonBody):
    """PUT /v1/topics/{topic_key}: the topic's name and description (replaced whole)."""

    name: text(1, 200) = Field(description="What members see, such as “Project Apollo” (“Unfollow Project Apollo”).")
    description: text(0, DESCRIPTION_MAX) = ""


class SubscribersIn(JsonBody):
    """POST /v1/topics/{topic_key}/subscribers: followers to add and to remove, by external id."""

    add: Annotated[list[ExternalId], Field(max_length=service.MAX_SUBSCRIBERS_PER_CALL)] = Field(
        default_factory=list, description="External ids to add (at most 10,000 in add and remove together)."
    )
    remove: Annotated[list[ExternalId], Field(max_length=service.MAX_SUBSCRIBERS_PER_CALL)] = Field(
        default_factory=list, description="External ids to remove (unknown ones and non-followers are no error)."
    )


class PageQuery(JsonBody):
    """A keyset page: pass `next_cursor` back as `cursor`."""

    cursor: text(1, 20) | None = Field(None, description="The `next_cursor` of the page before.")
    limit: int = Field(100, ge=1, le=PAGE_MAX, description="Rows per page.")


class TopicOut(BaseModel):
    key: str
    name: str
    description: str
    created_at: datetime
    updated_at: datetime


class SubscriberOut(BaseModel):
    external_id: str
    subscribed_at: datetime


class SubscribersOut(BaseModel):
    """One page of a topic's followers, by when their account was made (user id order)."""

    subscribers: list[SubscriberOut]
    next_cursor: str | None = Field(description="Pass it as `cursor` for the next page; null on the last.")


class SubscribersChanged(BaseModel):
    added: int = Field(description="Followers the call added (those already following count 0).")
    removed: int = Field(description="Followers the call removed.")


class UserTopicOut(BaseModel):
    key: str
    name: str
    description: str
    subscribed_at: datetime


class UserTopicsOut(BaseModel):
    topics: list[UserTopicOut]
    next_cursor: str | None


class FanoutOut(BaseModel):
    """A topic notification's fanout: running until every follower has their row."""

    id: int
    topic: str
    type: str
    dedupe_key: str
    status: Literal["running", "done", "failed"]
    total: int = Field(description="Followers to notify (the final count once done).")
    done: int = Field(description="Followers handled so far.")
    created: int = Field(description="New notifications written (a repeat of the dedupe key writes none).")
    url: str = Field(description="Where to poll this fanout.")
    created_at: datetime
    finished_at: datetime | None


class TopicNotificationAccepted(BaseModel):
    """The 202 of POST /v1/notifications with `topic`: the fanout runs in the background."""

    type: str
    topic: str
    dedupe_key: str
    fanout: FanoutOut


UNKNOWN_TOPIC = lazy_gettext("There is no topic with this key.")
BAD_CURSOR = lazy_gettext("That page link is not valid. Start again from the first page.")
TOO_MANY = lazy_gettext("Send at most %(max)s external ids per call (add and remove together).")


def _key(topic_key: str) -> str:
    return schemas.validate_topic_key(topic_key)


def _topic(key: str):
    row = queries.topic(key)
    if row is None:
        raise ApiError(404, str(UNKNOWN_TOPIC))
    return row


def _after(query: PageQuery) -> int:
    if query.cursor is None:
        return 0
    after = parse_id_cursor(query.cursor)
    if after is None:
        raise ApiError(422, str(BAD_CURSOR), errors=[{"field": "cursor", "message": str(BAD_CURSOR)}])
    return after


def fanout_out(row) -> FanoutOut:
    """The fanout as the API shows it (with the URL to poll)."""
    url = current_app.config["BASE_URL"] + url_for("api.get_fanout", fanout_id=row["id"])
    return FanoutOut(id=row["id"], topic=row["topic_key"], type=row["type"], dedupe_key=row["dedupe_key"],
                     status=row["status"], total=row["total"], done=row["done"], created=row["created"], url=url,
                     created_at=row["created_at"], finished_at=row["finished_at"])  # fmt: skip


def create_topic_fanout(
    payload: notification_schemas.NotificationIn,
    content: dict,
    admit: Callable[[int], None] | None = None,
    tenant_id: int | None = None,
) -> TopicNotificationAccepted:
    """POST /v1/notifications with `topic`: record the fanout (its job follows the commit); 422 for a topic that is
    not there, naming the field (nothing written). admit(followers) may refuse first (the quotas)."""
    try:
        created = service.create_fanout(
            payload.topic, excluded=payload.left_out(), admit=admit, tenant_id=tenant_id, **content
        )
    except service.UnknownTopic:
        errors = [{"field": "topic", "message": gettext("there is no topic with this key")}]
        raise ApiError(422, gettext("Nothing was sent: there is no topic %(key)s.", key=repr(payload.topic)),
                       errors=errors) from None  # fmt: skip
    row = queries.fanout(created["id"])
    return TopicNotificationAccepted(type=payload.type, topic=payload.topic, dedupe_key=content["dedupe_key"],
                                     fanout=fanout_out(row))  # fmt: skip


@documented(
    "putTopic",
    "Create or update a topic",
    {200: TopicOut, 201: TopicOut},
    errors=(422,),
    tags=TAGS,
    description="A topic is something members follow (a project, a thread). Its name is what members see "
    "(“Unfollow Project Apollo” in the inbox and preferences).",
)
@auth.requires("topics:write")
@idempotent(TopicIn)
def put_topic(topic_key: str, payload: TopicIn):
    """Create the topic (201) or replace its name and description (200)."""
    row, created = service.put_topic(_key(topic_key), payload.name, payload.description)
    out = TopicOut(**{name: row[name] for name in TopicOut.model_fields})
    response = store(json_response(201 if created else 200, out))
    commit()
    return response


@documented(
    "deleteTopic",
    "Delete a topic and its followers",
    {204: None},
    errors=(404, 422),
    tags=TAGS,
    description="Its subscriptions go with it; a fanout still running stops at its next batch. Notifications "
    "already written stay.",
)
@auth.requires("topics:write")
@idempotent()
def delete_topic(topic_key: str):
    """Delete the topic."""
    try:
        service.delete_topic(_key(topic_key))
    except service.UnknownTopic:
        raise ApiError(404, str(UNKNOWN_TOPIC)) from None
    response = store(json_response(204))
    commit()
    return response


@documented(
    "changeTopicSubscribers",
    "Add and remove a topic's followers",
    {200: SubscribersChanged},
    errors=(404, 422),
    tags=TAGS,
    description="Idempotent: adding a follower twice, or removing one who does not follow, is no error. At most "
    "10,000 external ids per call. An external id to add that names no user is the same 422 as an unknown "
    "recipient of POST /v1/notifications (`unknown_recipients` lists them; create them with PUT /v1/users/{id}), "
    "and nothing is written; one id in both lists is a 422 too.",
)
@auth.requires("topics:write")
@idempotent(SubscribersIn)
def change_subscribers(topic_key: str, payload: SubscribersIn):
    """Add and remove followers in one set-based statement."""
    key = _key(topic_key)
    if len(payload.add) + len(payload.remove) > service.MAX_SUBSCRIBERS_PER_CALL:
        message = str(TOO_MANY) % {"max": f"{service.MAX_SUBSCRIBERS_PER_CALL:,}"}
        raise ApiError(422, message, errors=[{"field": "add", "message": message}])
    both = sorted(set(payload.add) & set(payload.remove))
    if both:
        message = gettext("an external id cannot be in both add and remove")
        detail = ngettext("Nothing was changed: %(num)d external id is in both lists.",
                          "Nothing was changed: %(num)d external ids are in both lists.", len(both))  # fmt: skip
        raise ApiError(422, detail, errors=[{"field": "remove", "message": message}], both=both[:100])
    try:
        change = service.change_subscribers(key, payload.add, payload.remove)
    except service.UnknownTopic:
        raise ApiError(404, str(UNKNOWN_TOPIC)) from None
    except service.UnknownUsers as error:
        raise ApiError(
            422,
            ngettext(
                "Nothing was changed: %(num)d unknown user.",
                "Nothing was changed: %(num)d unknown users.",
                len(error.refs),
            ),  # fmt: skip
            errors=[{"field": "add", "message": gettext("unknown recipients: create them with PUT /v1/users/{id}")}],
            unknown_recipients=error.refs,
        ) from None
    response = store(json_response(200, SubscribersChanged(added=change.added, removed=change.removed)))
    commit()
    return response


@documented(
    "listTopicSubscribers",
    "A topic's followers, page by page",
    {200: SubscribersOut},
    errors=(404, 422),
    tags=TAGS,
    description="Keyset-paged: pass `next_cursor` back as `cursor` (up to 1,000 a page).",
)
@auth.requires("topics:read")
@bodies.takes_query(PageQuery)
def list_subscribers(topic_key: str, query: PageQuery):
    """One page of followers."""
    topic = _topic(_key(topic_key))
    page = queries.subscribers(topic["id"], _after(query), query.limit)
    rows = [SubscriberOut(external_id=row.external_id, subscribed_at=row.subscribed_at) for row in page.rows]
    return json_response(200, SubscribersOut(subscribers=rows, next_cursor=page.next_cursor))


@documented(
    "listUserTopics",
    "The topics a member follows",
    {200: UserTopicsOut},
    errors=(404, 422),
    tags=TAGS,
    description="Keyset-paged like the followers. An operator account's answers 403, an unknown one 404.",
)
@auth.requires("topics:read")
@bodies.takes_query(PageQuery)
def list_user_topics(external_id: str, query: PageQuery):
    """One page of the member's topics."""
    user_id = export.member_id(schemas.validate_path_id(external_id))
    page = queries.user_topics(user_id, _after(query), query.limit)
    rows = [UserTopicOut(key=r.key, name=r.name, description=r.description, subscribed_at=r.subscribed_at)
            for r in page.rows]  # fmt: skip
    return json_response(200, UserTopicsOut(topics=rows, next_cursor=page.next_cursor))


@documented(
    "getFanout",
    "A topic notification's fanout: its progress",
    {200: FanoutOut},
    errors=(404,),
    tags=TAGS,
    description="Only the API key that sent the notification can read it; for any other key the answer is 404.",
)
@auth.requires("notifications:read")
def get_fanout(fanout_id: int):
    """The fanout's status, total and done."""
    row = queries.fanout(fanout_id)
    if row is None or row["api_key_id"] != auth.current_key().id:
        raise ApiError(404, gettext("There is no fanout with this id."))
    return json_response(200, fanout_out(row))


# Up to 10,000 external ids: more than API_MAX_BODY_BYTES holds (the guard in app/api/views.py reads it).
change_subscribers.body_limit_setting = "TOPIC_SUBSCRIBERS_MAX_BODY_BYTES"

# (rule, method, view): the API blueprint adds each (app/api/views.py), in this order.
RULE = "/topics/<topic_key>"
ROUTES = (
    (RULE, "PUT", put_topic),
    (RULE, "DELETE", delete_topic),
    (RULE + "/subscribers", "POST", change_subscribers),
    (RULE + "/subscribers", "GET", list_subscribers),
    ("/users/<external_id>/topics", "GET", list_user_topics),
    ("/fanouts/<int:fanout_id>", "GET", get_fanout),
)
