"""deliver_batch(channel, ids): the job that sends a batch of ledger rows on one channel."""

from __future__ import annotations

from flask import current_app

from app.delivery import engine


def deliver_batch(channel: str, delivery_ids: list[int]) -> dict:
    """Claim, re-check, render, send and record the rows (app/delivery/engine.py); return the counts."""
    return engine.deliver_batch(channel, delivery_ids, current_app.config)
