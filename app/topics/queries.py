"""Topic reads: a topic, its followers and a member's topics (keyset pages by user id / topic id), fanouts."""

from __future__ import annotations

import sqlalchemy as sa

from app.campaigns.queries import Progress
from app.extensions import db
from app.pagination import Page

TOPIC_SQL = sa.text("SELECT id, key, name, description, created_at, updated_at FROM topics WHERE key = :key")

# The fanout's and the API's walk over one topic: an index range of topic_subscriptions_topic_idx. `u.id > :after`
# too, so a merge join starts users' key at the cursor rather than at its first id (app/topics/fanout.py).
SUBSCRIBERS_SQL = sa.text(
    """
SELECT s.user_id, u.external_id, s.created_at AS subscribed_at
FROM topic_subscriptions s JOIN users u ON u.id = s.user_id
WHERE s.topic_id = :topic_id AND s.user_id > :after AND u.id > :after
ORDER BY s.user_id
LIMIT :limit
"""
)

# A member's topics: the primary key's range (user_id first).
USER_TOPICS_SQL = sa.text(
    """
SELECT t.id, t.key, t.name, t.description, s.created_at AS subscribed_at
FROM topic_subscriptions s JOIN topics t ON t.id = s.topic_id
WHERE s.user_id = :user_id AND s.topic_id > :after
ORDER BY s.topic_id
LIMIT :limit
"""
)

# A fanout for a tenant reaches the followers who are its members (tenant_members' key leads with user_id).
MEMBER_OF_TENANT_SQL = """(CAST(:tenant AS bigint) IS NULL OR EXISTS (
    SELECT 1 FROM tenant_members m WHERE m.user_id = s.user_id AND m.tenant_id = CAST(:tenant AS bigint)))"""

COUNT_SQL = sa.text(
    "SELECT count(*) FROM topic_subscriptions s WHERE s.topic_id = :topic_id "
    f"AND s.user_id <> ALL(CAST(:excluded AS bigint[])) AND {MEMBER_OF_TENANT_SQL}"
)

USER_IDS_SQL = sa.text(
    "SELECT DISTINCT u.id FROM unnest(CAST(:refs AS text[])) AS e(ref) JOIN users u ON u.external_id = e.ref"
)

UNKNOWN_SQL = sa.text(
    """
SELECT e.ref
FROM unnest(CAST(:refs AS text[])) WITH ORDINALITY AS e(ref, ord)
WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.external_id = e.ref)
ORDER BY e.ord
"""
)

FANOUT_SQL = sa.text("SELECT * FROM topic_fanouts WHERE id = :id")
FANOUTS_SQL = sa.text(
    """
SELECT f.id, f.topic_key, t.name AS topic_name, f.type, f.title, f.status, f.total, f.done, f.created,
       f.error, f.created_at, f.finished_at
FROM topic_fanouts f LEFT JOIN topics t ON t.id = f.topic_id
WHERE (CAST(:before AS bigint) IS NULL OR f.id < :before)
ORDER BY f.id DESC
LIMIT :limit
"""
)
RUNNING_SQL = sa.text("SELECT id FROM topic_fanouts WHERE status = 'running' ORDER BY id")

# The topic a member's own notification came from, while they still follow it (the inbox's Unfollow).
FOLLOWED_FROM_SQL = sa.text(
    """
SELECT n.id AS notification_id, t.key, t.name
FROM notifications n
JOIN topic_subscriptions s ON s.user_id = n.user_id AND s.topic_id = n.topic_id
JOIN topics t ON t.id = n.topic_id
WHERE n.user_id = :user_id AND n.id = ANY(CAST(:ids AS bigint[])) AND n.topic_id IS NOT NULL
"""
)


def topic(key: str):
    """The topic with this key, or None."""
    return db.session.execute(TOPIC_SQL, {"key": key}).mappings().first()


def subscribers(topic_id: int, after: int, limit: int) -> Page:
    """One keyset page of a topic's followers, by user id."""
    rows = db.session.execute(SUBSCRIBERS_SQL, {"topic_id": topic_id, "after": after, "limit": limit + 1}).all()
    return Page.of(rows, limit, lambda row: str(row.user_id))


def user_topics(user_id: int, after: int = 0, limit: int = 1000) -> Page:
    """One keyset page of the topics a member follows, by topic id."""
    rows = db.session.execute(USER_TOPICS_SQL, {"user_id": user_id, "after": after, "limit": limit + 1}).all()
    return Page.of(rows, limit, lambda row: str(row.id))


def audience_size(topic_id: int, excluded: list[int], tenant_id: int | None = None) -> int:
    """How many followers a fanout to the topic leaving out `excluded` (user ids) reaches right now (with a tenant:
    its members only)."""
    params = {"topic_id": topic_id, "excluded": excluded, "tenant": tenant_id}
    return db.session.execute(COUNT_SQL, params).scalar_one()


def user_ids(external_ids: list[str]) -> list[int]:
    """The ids of the users these external ids name (unknown ones are left out)."""
    return list(db.session.execute(USER_IDS_SQL, {"refs": external_ids}).scalars()) if external_ids else []


def unknown_external_ids(refs: list[str]) -> list[str]:
    """The refs that name no user, in their order (one statement)."""
    return list(db.session.execute(UNKNOWN_SQL, {"refs": refs}).scalars()) if refs else []


def fanout(fanout_id: int):
    """A topic fanout row, or None."""
    return db.session.execute(FANOUT_SQL, {"id": fanout_id}).mappings().first()


def fanouts(before: int | None, limit: int) -> Page:
    """One keyset page of topic fanouts, newest first."""
    rows = db.session.execute(FANOUTS_SQL, {"before": before, "limit": limit + 1}).mappings().all()
    return Page.of(rows, limit, lambda row: str(row["id"]))


def running_fanouts() -> list[int]:
    """Ids of running topic fanouts (the sweeper checks each has a live job)."""
    return list(db.session.execute(RUNNING_SQL).scalars())


def followed_from(user_id: int, notification_ids: list[int]) -> dict[int, tuple[str, str]]:
    """For the member's notifications that came from a topic they still follow: id → (topic key, name)."""
    if not notification_ids:
        return {}
    rows = db.session.execute(FOLLOWED_FROM_SQL, {"user_id": user_id, "ids": notification_ids})
    return {row.notification_id: (row.key, row.name) for row in rows}


PROGRESS_SQL = sa.text(
    "SELECT id, status, total, done, NULL AS scheduled_at, created_at, finished_at, error FROM topic_fanouts "
    "WHERE id = :id"
)


def progress(fanout_id: int) -> Progress | None:
    """The fanout's progress in the campaigns' shape (one primary-key read, cheap enough to poll every second)."""
    row = db.session.execute(PROGRESS_SQL, {"id": fanout_id}).first()
    return Progress(*row) if row else None


DETAIL_SQL = sa.text(
    """
SELECT f.*, t.name AS topic_name, k.name AS api_key_name,
       (SELECT count(*) FROM topic_subscriptions s WHERE s.topic_id = f.topic_id) AS followers
FROM topic_fanouts f LEFT JOIN topics t ON t.id = f.topic_id LEFT JOIN api_keys k ON k.id = f.api_key_id
WHERE f.id = :id
"""
)


def fanout_detail(fanout_id: int):
    """A fanout with its topic's name and follower count and the API key's name, or None."""
    return db.session.execute(DETAIL_SQL, {"id": fanout_id}).mappings().first()
