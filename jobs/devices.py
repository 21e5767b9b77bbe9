"""RQ entry point for the phones' badge sync (app/devices/badge.py)."""

from __future__ import annotations

from flask import current_app

from app.devices import badge
from app.unitofwork import commit


def sync_badges(user_ids: list[int]) -> dict:
    """Send each user's current unread count to their iPhones' app icon."""
    counts = badge.sync(user_ids, current_app.config)
    commit()  # the tokens APNs refused, invalidated
    return counts
