"""Scheduled announcements: tell every open socket to recount when one's time comes.

An announcement is one row; inboxes show it from published_at on without anyone doing anything.
What no query can do by itself is move a badge that is already on screen, so the sweeper calls
announce_due() every few seconds: if any announcement was published (or expired) since the last
run, it publishes one broadcast badge event. The watermark lives in Redis; losing it costs at most
one extra broadcast (the first run looks back a few minutes), which only makes sockets recount.
"""

from __future__ import annotations

import logging
from datetime import datetime

import sqlalchemy as sa
from redis.exceptions import RedisError

from app.extensions import db, redis
from app.realtime.publish import publish_broadcast

log = logging.getLogger(__name__)

WATERMARK_KEY = "hato:announcements:watermark"

# statement_timestamp(), not now(): a caller's long transaction must not freeze the clock.
# Announcements are few (one row per broadcast), so the expiry half needs no index.
DUE_SQL = sa.text(
    """
WITH w AS (SELECT COALESCE(CAST(:since AS timestamptz), statement_timestamp() - interval '5 minutes') AS since,
                  statement_timestamp() AS until)
SELECT w.until,
       EXISTS (SELECT 1 FROM announcements a
               WHERE a.published_at > w.since AND a.published_at <= w.until) AS published,
       EXISTS (SELECT 1 FROM announcements a
               WHERE a.expires_at > w.since AND a.expires_at <= w.until) AS expired
FROM w
"""
)


def announce_due() -> dict:
    """Publish one broadcast badge event if an announcement went live or expired since the last run."""
    client = redis.client()
    try:
        raw = client.get(WATERMARK_KEY)
    except RedisError as exc:
        log.warning("announcement watermark unavailable (next run retries): %s", exc)
        return {"announced": False, "redis": "down"}
    since = datetime.fromisoformat(raw.decode()) if raw else None
    row = db.session.execute(DUE_SQL, {"since": since}).one()
    announced = row.published or row.expired
    # Advance the watermark only after a successful publish, so a Redis hiccup means "try again".
    if announced and not publish_broadcast():
        return {"announced": False, "redis": "down"}
    try:
        client.set(WATERMARK_KEY, row.until.isoformat())
    except RedisError as exc:
        log.warning("could not store the announcement watermark: %s", exc)
    return {"announced": bool(announced)}
