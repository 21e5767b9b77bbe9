"""fanout_campaign(campaign_id): the job that writes a campaign's notifications in keyset batches."""

from __future__ import annotations

from flask import current_app

from app.campaigns import fanout


def fanout_campaign(campaign_id: int) -> dict:
    """Fan the campaign out in committed batches (app/campaigns/fanout.py); return what was written."""
    return fanout.run(int(campaign_id), int(current_app.config["FANOUT_BATCH_SIZE"]))
