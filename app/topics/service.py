"""Topic writes: create/update/delete a topic, add and remove followers in sets, a member's unfollow, a fanout.

Every function flushes and never commits; the fanout's job is registered to follow the caller's commit.
Adding followers takes the ingest's rule for unknown external ids (app/notify/service.py, strict): one unknown
id and nothing is written, the error names them all (create users with PUT /v1/users/{id} first).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from app.extensions import db
from app.notify.service import NotifyError
from app.queueing import topic_fanout_job
from app.topics import queries
from app.unitofwork import after_commit
from app.webhooks import service as webhooks

MAX_SUBSCRIBERS_PER_CALL = 10_000

PUT_SQL = sa.text(
    """
INSERT INTO topics (key, name, description) VALUES (:key, :name, :description)
ON CONFLICT (key) DO UPDATE SET name = EXCLUDED.name, description = EXCLUDED.description, updated_at = now()
RETURNING id, key, name, description, created_at, updated_at, (xmax = 0) AS created
"""
)
DELETE_SQL = sa.text("DELETE FROM topics WHERE key = :key RETURNING id")

# One statement for both lists, set-based: unnest the external ids, join users, insert or delete in user-id order.
CHANGE_SQL = sa.text(
    """
WITH adding AS (
  SELECT DISTINCT u.id FROM unnest(CAST(:add AS text[])) AS e(ref) JOIN users u ON u.external_id = e.ref
),
added AS (
  INSERT INTO topic_subscriptions (user_id, topic_id)
  SELECT id, :topic_id FROM adding ORDER BY id
  ON CONFLICT DO NOTHING
  RETURNING user_id
),
removed AS (
  DELETE FROM topic_subscriptions s
  USING (SELECT DISTINCT u.id FROM unnest(CAST(:remove AS text[])) AS e(ref)
         JOIN users u ON u.external_id = e.ref) r
  WHERE s.user_id = r.id AND s.topic_id = :topic_id
  RETURNING s.user_id
)
SELECT (SELECT count(*) FROM added) AS added, (SELECT count(*) FROM removed) AS removed
"""
)

# Only the member's own row: user_id comes from the session, never from the form.
UNFOLLOW_SQL = sa.text(
    """
DELETE FROM topic_subscriptions s USING topics t
WHERE s.user_id = :user_id AND s.topic_id = t.id AND t.key = :key
RETURNING t.key, t.name
"""
)

FANOUT_INSERT_SQL = sa.text(
    """
INSERT INTO topic_fanouts (topic_id, topic_key, api_key_id, type, title, body, link_path, data, dedupe_key,
                           group_key, cancellation_key, route, channel_mode, excluded_user_ids, total, tenant_id)
VALUES (:topic_id, :topic_key, :api_key_id, :type, :title, :body, :link_path, CAST(:data AS jsonb), :dedupe_key,
        :group_key, :cancellation_key, CAST(:route AS text[]), :mode, CAST(:excluded AS bigint[]), :total,
        CAST(:tenant AS bigint))
RETURNING id, status, total, done
"""
)

TYPE_SQL = sa.text("SELECT 1 FROM notification_types WHERE type = :type")


class UnknownTopic(LookupError):
    """No topic has this key."""


class UnknownUsers(ValueError):
    """Some external ids to add name no user; nothing was written."""

    def __init__(self, refs: list[str]) -> None:
        super().__init__(f"{len(refs)} unknown user(s)")
        self.refs = refs


@dataclass(frozen=True)
class Change:
    """How many followers a call really added and removed (repeats count 0)."""

    added: int
    removed: int


def put_topic(key: str, name: str, description: str) -> tuple[dict, bool]:
    """Create the topic or replace its name and description; return it and whether it is new."""
    row = db.session.execute(PUT_SQL, {"key": key, "name": name, "description": description}).mappings().one()
    return dict(row), row["created"]


def delete_topic(key: str) -> None:
    """Delete the topic and its subscriptions (UnknownTopic if there is none); running fanouts find nobody."""
    if db.session.execute(DELETE_SQL, {"key": key}).first() is None:
        raise UnknownTopic(key)


def change_subscribers(key: str, add: list[str], remove: list[str]) -> Change:
    """Add and remove followers by external id, idempotently, in one statement (UnknownTopic, UnknownUsers)."""
    topic = queries.topic(key)
    if topic is None:
        raise UnknownTopic(key)
    unknown = queries.unknown_external_ids(add)
    if unknown:
        raise UnknownUsers(unknown)
    row = db.session.execute(CHANGE_SQL, {"topic_id": topic["id"], "add": add, "remove": remove}).one()
    return Change(added=row.added, removed=row.removed)


def unfollow(user_id: int, key: str) -> dict | None:
    """The member stops following the topic (their own row only); the product hears `topic.unsubscribed`.

    None when they did not follow it (a repeat: nothing to tell).
    """
    row = db.session.execute(UNFOLLOW_SQL, {"user_id": user_id, "key": key}).mappings().first()
    if row is None:
        return None
    webhooks.emit("topic.unsubscribed", {"user_id": user_id, "topic": row["key"]})
    return dict(row)


def create_fanout(
    key: str,
    *,
    type_: str,
    title: str,
    body: str,
    dedupe_key: str,
    link_path: str | None = None,
    data: dict | None = None,
    api_key_id: int | None = None,
    group_key: str | None = None,
    cancellation_key: str | None = None,
    channels: list[str] | None = None,
    channel_mode: str | None = None,
    excluded: list[str] = (),
    admit: Callable[[int], None] | None = None,
    tenant_id: int | None = None,
) -> dict:
    """Record a notification to the topic's followers but the excluded external ids; its job follows the commit.

    The fanout itself runs in keyset batches (app/topics/fanout.py). UnknownTopic when there is no such topic,
    NotifyError for an unknown type (nothing written either way). admit(total) is called with the number of
    followers to notify before anything is written: it may refuse (the API's quotas) and nothing is. With a tenant
    the fanout reaches the followers who are its members, and its rows carry the tenant.
    """
    topic = queries.topic(key)
    if topic is None:
        raise UnknownTopic(key)
    if db.session.execute(TYPE_SQL, {"type": type_}).first() is None:
        raise NotifyError(type_, [])
    excluded_ids = queries.user_ids(list(dict.fromkeys(excluded)))
    total = queries.audience_size(topic["id"], excluded_ids, tenant_id)
    if admit is not None:
        admit(total)
    row = (
        db.session.execute(
            FANOUT_INSERT_SQL,
            {
                "topic_id": topic["id"],
                "topic_key": key,
                "api_key_id": api_key_id,
                "type": type_,
                "title": title,
                "body": body,
                "link_path": link_path,
                "data": json.dumps(data or {}, separators=(",", ":")),
                "dedupe_key": dedupe_key,
                "group_key": group_key,
                "cancellation_key": cancellation_key,
                "route": channels,
                "mode": channel_mode,
                "excluded": excluded_ids,
                "total": total,
                "tenant": tenant_id,
            },
        )
        .mappings()
        .one()
    )
    after_commit(topic_fanout_job(row["id"]))
    return dict(row)
