"""Campaign reads: the list (keyset), one campaign's progress and results, what the sweeper must start."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from flask_babel import lazy_pgettext

from app.extensions import db
from app.models import CAMPAIGN_STATUSES, Campaign
from app.pagination import Cursor, Page, time_cursor
from app.sqltext import like_prefix

PAGE_SIZE = 30
LIVE_STATUSES = ("scheduled", "running")

LIST_SQL = """
SELECT c.id, c.name, c.type, t.label AS type_label, c.audience_kind, c.audience_locale, c.status,
       c.scheduled_at, c.total, c.done, c.created_at, c.started_at, c.finished_at, u.email AS created_by
FROM campaigns c
JOIN notification_types t ON t.type = c.type
LEFT JOIN users u ON u.id = c.created_by
{where}
ORDER BY c.created_at DESC, c.id DESC
LIMIT :limit
"""


STATUSES = CAMPAIGN_STATUSES
# How operators read each status (the stored value stays).
STATUS_LABELS = {
    "draft": lazy_pgettext("campaign status", "draft"),
    "scheduled": lazy_pgettext("campaign status", "scheduled"),
    "running": lazy_pgettext("campaign status", "running"),
    "done": lazy_pgettext("campaign status", "done"),
    "cancelled": lazy_pgettext("campaign status", "cancelled"),
    "failed": lazy_pgettext("campaign status", "failed"),
}


def campaign_page(
    cursor: str | None = None, limit: int = PAGE_SIZE, q: str = "", status: str = "", type_: str = ""
) -> Page:
    """Return one page of campaigns, newest first, keyset on (created_at, id).

    q narrows to names or titles containing it (case-insensitive; % and _ literal); status and type_ exactly.
    """
    position = Cursor.decode(cursor)
    params: dict = {"limit": limit + 1}
    conditions = []
    if position:
        conditions.append("(c.created_at, c.id) < (:c_at, :c_id)")
        params.update(c_at=position.created_at, c_id=position.id)
    if q.strip():
        conditions.append("(c.name ILIKE :contains ESCAPE '\\' OR c.title ILIKE :contains ESCAPE '\\')")
        params["contains"] = "%" + like_prefix(q.strip())
    if status:
        conditions.append("c.status = :status")
        params["status"] = status
    if type_:
        conditions.append("c.type = :type")
        params["type"] = type_
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    rows = list(db.session.execute(sa.text(LIST_SQL.format(where=where)), params).mappings())
    return Page.of(rows, limit, time_cursor())


def campaign(campaign_id: int) -> Campaign | None:
    """Return the campaign with this id, if any (read fresh: a job may have moved it)."""
    return db.session.get(Campaign, campaign_id, populate_existing=True)


PROGRESS_SQL = sa.text(
    """
SELECT id, status, total, done, scheduled_at, started_at, finished_at, error
FROM campaigns WHERE id = :id
"""
)


@dataclass(frozen=True)
class Progress:
    """How far a campaign's fanout is: done of total users."""

    id: int
    status: str
    total: int
    done: int
    scheduled_at: object
    started_at: object
    finished_at: object
    error: str | None

    @property
    def percent(self) -> int:
        """Whole percent done (100 once the fanout finished, whatever the counts)."""
        if self.status == "done":
            return 100
        return min(100, self.done * 100 // self.total) if self.total else 0

    @property
    def live(self) -> bool:
        """Whether the bar still moves (the page keeps polling)."""
        return self.status in LIVE_STATUSES


def progress(campaign_id: int) -> Progress | None:
    """Return the campaign's progress (one primary-key read, cheap enough to poll every second)."""
    row = db.session.execute(PROGRESS_SQL, {"id": campaign_id}).first()
    return Progress(*row) if row else None


DELIVERY_STATS_SQL = sa.text(
    """
SELECT d.channel,
       count(*) FILTER (WHERE d.status = 'pending') AS pending,
       count(*) FILTER (WHERE d.status = 'sending') AS sending,
       count(*) FILTER (WHERE d.status = 'sent') AS sent,
       count(*) FILTER (WHERE d.status = 'skipped') AS skipped,
       count(*) FILTER (WHERE d.status = 'failed') AS failed
FROM notifications n
JOIN notification_deliveries d ON d.notification_id = n.id
WHERE n.campaign_id = :id
GROUP BY d.channel
ORDER BY d.channel
"""
)

# In-app "sent" is a row in the inbox; "skipped" is a row written only to anchor e-mail/push for a
# user who turned the inbox off (born read, so it must not count towards the read rate).
INBOX_STATS_SQL = sa.text(
    """
SELECT count(*) FILTER (WHERE in_app) AS sent,
       count(*) FILTER (WHERE NOT in_app) AS skipped,
       count(*) FILTER (WHERE in_app AND read_at IS NOT NULL) AS read
FROM notifications
WHERE campaign_id = :id
"""
)


@dataclass(frozen=True)
class ChannelStats:
    """One channel's outcome for a campaign."""

    channel: str
    sent: int = 0
    skipped: int = 0
    failed: int = 0
    pending: int = 0
    sending: int = 0

    @property
    def waiting(self) -> int:
        """Rows not settled yet (pending or being sent)."""
        return self.pending + self.sending


@dataclass(frozen=True)
class CampaignStats:
    """Sent / skipped / failed per channel, and how many inbox rows were read."""

    channels: list[ChannelStats]
    read: int

    @property
    def inbox(self) -> ChannelStats:
        """The in-app channel's figures."""
        return self.channels[0]

    @property
    def read_rate(self) -> float | None:
        """Read inbox rows over inbox rows written (None before any was written)."""
        return self.read / self.inbox.sent if self.inbox.sent else None

    @property
    def waiting(self) -> int:
        """E-mail and push rows not settled yet."""
        return sum(c.waiting for c in self.channels)


def campaign_stats(campaign_id: int) -> CampaignStats:
    """Return per-channel outcomes and the read rate (two statements over the campaign's index)."""
    inbox = db.session.execute(INBOX_STATS_SQL, {"id": campaign_id}).one()
    by_channel = {row.channel: row for row in db.session.execute(DELIVERY_STATS_SQL, {"id": campaign_id})}
    channels = [ChannelStats("in_app", sent=inbox.sent, skipped=inbox.skipped)]
    for channel in ("email", "push"):
        row = by_channel.get(channel)
        channels.append(
            ChannelStats(channel, row.sent, row.skipped, row.failed, row.pending, row.sending)
            if row
            else ChannelStats(channel)
        )
    return CampaignStats(channels, inbox.read)


TO_RUN_SQL = sa.text(
    """
SELECT id FROM campaigns WHERE status = 'scheduled' AND scheduled_at <= now()
UNION
SELECT id FROM campaigns WHERE status = 'running'
ORDER BY id
LIMIT 100
"""
)


def campaigns_to_run() -> list[int]:
    """Ids of due scheduled campaigns and of running ones (the sweeper checks each has a live job)."""
    return list(db.session.execute(TO_RUN_SQL).scalars())


UNKNOWN_SQL = sa.text(
    """
SELECT e.ref
FROM unnest(CAST(:refs AS text[])) WITH ORDINALITY AS e(ref, ord)
WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.external_id = e.ref)
ORDER BY e.ord
"""
)


def unknown_external_ids(refs: list[str]) -> list[str]:
    """Return the refs that name no user, in their original order (one statement)."""
    return list(db.session.execute(UNKNOWN_SQL, {"refs": refs}).scalars()) if refs else []


TEMPLATE_LOCALES_SQL = sa.text("SELECT DISTINCT locale FROM message_templates ORDER BY locale LIMIT 200")


def known_locales(default: str) -> list[str]:
    """Locales worth suggesting for a locale audience: the default and every template's."""
    return sorted({default, *db.session.execute(TEMPLATE_LOCALES_SQL).scalars()})
