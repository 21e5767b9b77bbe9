"""Scheduled announcements: tell every open socket to recount when one's time comes.

An announcement is one row; inboxes show it from published_at on without anyone doing anything.
What no query can do by itself is move a badge that is already on screen, so the sweeper calls
announce_due() every few seconds: if any announcement was published (or expired) since the last
run, it publishes one broadcast badge event. The watermark lives in Redis and moves only after a
successful publish (both in one post-commit effect), so a Redis hiccup means "try again"; losing it
costs at most one extra broadcast (the first run looks back a few minutes), which only makes sockets
recount. The moment to judge by is the database's clock, or a `now` the caller passes (tests do).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from redis.exceptions import RedisError

from app import keyspace
from app.extensions import db, redis
from app.live.publish import publish_broadcast
from app.unitofwork import Effect, after_commit, commit

log = logging.getLogger(__name__)


def watermark_key() -> str:
    """The time up to which announcement changes have been broadcast."""
    return keyspace.key("announcements", "watermark")


# statement_timestamp(), not now(): a caller's long transaction must not freeze the clock.
# Announcements are few (one row per broadcast), so the expiry half needs no index.
DUE_SQL = sa.text(
    """
WITH clock AS (SELECT COALESCE(CAST(:now AS timestamptz), statement_timestamp()) AS now),
w AS (SELECT COALESCE(CAST(:since AS timestamptz), clock.now - interval '5 minutes') AS since, clock.now AS until
      FROM clock)
SELECT w.until,
       EXISTS (SELECT 1 FROM announcements a
               WHERE a.published_at > w.since AND a.published_at <= w.until) AS published,
       EXISTS (SELECT 1 FROM announcements a
               WHERE a.expires_at > w.since AND a.expires_at <= w.until) AS expired
FROM w
"""
)


@dataclass(frozen=True)
class AnnounceDue(Effect):
    """Publish the broadcast (if anything changed) and only then move the watermark to `until`."""

    until: datetime
    announce: bool

    def merge_key(self):
        return ("announce-due",)

    def merge(self, other: AnnounceDue) -> AnnounceDue:
        return AnnounceDue(max(self.until, other.until), self.announce or other.announce)

    def run(self) -> bool:
        if self.announce and not publish_broadcast():
            return False
        try:
            redis.client().set(watermark_key(), self.until.isoformat())
        except RedisError as exc:
            log.warning("could not store the announcement watermark: %s", exc)
        return True

    def count(self, result: object) -> dict[str, int]:
        if not result:
            return {"redis_down": 1}
        return {"announced": 1} if self.announce else {}


def announce_due(now: datetime | None = None) -> dict:
    """Publish one broadcast badge event if an announcement went live or expired since the last run."""
    try:
        raw = redis.client().get(watermark_key())
    except RedisError as exc:
        log.warning("announcement watermark unavailable (next run retries): %s", exc)
        return {"announced": False, "redis": "down"}
    since = datetime.fromisoformat(raw.decode()) if raw else None
    row = db.session.execute(DUE_SQL, {"since": since, "now": now}).one()
    after_commit(AnnounceDue(row.until, bool(row.published or row.expired)))
    counts = commit().wait()
    if counts.get("redis_down"):
        return {"announced": False, "redis": "down"}
    return {"announced": bool(counts.get("announced"))}
