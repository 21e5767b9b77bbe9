"""The fanout jobs: a campaign's notifications, and a topic notification's, in keyset batches."""

from __future__ import annotations

from flask import current_app

from app.campaigns import fanout
from app.topics import fanout as topic_fanout


def fanout_campaign(campaign_id: int) -> dict:
    """Fan the campaign out in committed batches (app/campaigns/fanout.py); return what was written."""
    return fanout.run(int(campaign_id), int(current_app.config["FANOUT_BATCH_SIZE"]))


def fanout_topic(fanout_id: int) -> dict:
    """Fan a notification out to a topic's followers in committed batches (app/topics/fanout.py)."""
    return topic_fanout.run(int(fanout_id), int(current_app.config["FANOUT_BATCH_SIZE"]))
