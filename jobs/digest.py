"""send_digests(ids): the job that sends a batch of digest runs, one e-mail each, through the delivery engine."""

from __future__ import annotations

from flask import current_app

from app.delivery import engine
from app.delivery.channels import channel_for
from app.digests.source import DIGESTS


def send_digests(run_ids: list[int]) -> dict:
    """Claim, render, send and record the runs on the e-mail channel (app/delivery/engine.py); return the counts."""
    return engine.deliver(DIGESTS, channel_for("email"), run_ids, current_app.config)
