"""The app icon's count follows the inbox: after a member reads, their iPhones get a background push with
the new badge, at most one per APNS_BADGE_SYNC_SECONDS, coalesced (app/queueing.py EnqueueBadgeSync).

The first change in a window schedules the sync at the window's end; the job reads the count then, so the
reads in between ride on it. It is not a delivery (no ledger row, no preference: it says nothing new);
a token APNs refuses for good is invalidated as after any push.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

import sqlalchemy as sa
from flask import current_app

from app.devices import service
from app.extensions import db, redis
from app.inbox.queries import badge_count
from app.providers import Message, ProviderError
from app.providers.base import FACTORIES
from app.providers.mobile import DeviceTarget, MobilePush
from app.queueing import badge_sync_key, enqueue_badge_sync_after_commit

log = logging.getLogger(__name__)

HAS_IPHONE_SQL = sa.text(
    "SELECT EXISTS (SELECT 1 FROM devices WHERE user_id = :user_id AND platform = 'ios'"
    " AND disabled_at IS NULL AND invalidated_at IS NULL)"
)

IPHONES_SQL = sa.text(
    """
SELECT id, user_id, token, app_id, coalesce(locale, '') AS locale FROM devices
WHERE user_id = ANY(CAST(:user_ids AS bigint[])) AND platform = 'ios' AND disabled_at IS NULL
  AND invalidated_at IS NULL
ORDER BY user_id, id
"""
)


def after_change(user_id: int) -> None:
    """The user's unread count changed in this transaction: sync their iPhones' badge after it (when APNs is on)."""
    config = current_app.config
    if config["APNS_KEY_FILE"] and db.session.execute(HAS_IPHONE_SQL, {"user_id": user_id}).scalar():
        enqueue_badge_sync_after_commit(user_id, float(config["APNS_BADGE_SYNC_SECONDS"]))


def sync(user_ids: Iterable[int], config: Mapping) -> dict[str, int]:
    """Send each user's badge to their iPhones now; return how many pushes went and failed."""
    user_ids = sorted(set(user_ids))
    redis.client().delete(*[badge_sync_key(user_id) for user_id in user_ids])  # a read from now on schedules anew
    provider = FACTORIES["apns"](config) if "apns" in FACTORIES else None
    phones: dict[int, list[DeviceTarget]] = {}
    for row in db.session.execute(IPHONES_SQL, {"user_ids": user_ids}):
        phones.setdefault(row.user_id, []).append(DeviceTarget(row.id, "ios", row.token, row.app_id, row.locale))
    counts = {"sent": 0, "failed": 0}
    if provider is None or not phones:
        return counts
    with provider:
        for user_id, targets in phones.items():
            push = MobilePush(badge=badge_count(user_id), background=True, priority="normal")
            message = Message(delivery_id=0, channel="push", to=f"user:{user_id}", subject="", text="",
                              targets=tuple(targets), mobile=push)  # fmt: skip
            try:
                receipt = provider.send(message)
                outcomes, reached = receipt.outcomes, receipt.reached
            except ProviderError as exc:
                log.warning("badge sync for user %s: %s", user_id, exc)
                outcomes, reached = exc.outcomes, ()
            gone = [(o.target, o.invalid, o.invalid_since) for o in outcomes if o.target and o.invalid]
            service.record_outcome(db.session, user_id, (), gone)  # a badge is not a message: last_sent stays
            counts["sent" if reached else "failed"] += 1
    return counts
