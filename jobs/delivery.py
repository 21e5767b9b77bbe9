"""deliver_batch(channel, ids) sends a batch of ledger rows on one channel; drain_deliveries a coalesced list."""

from __future__ import annotations

from flask import current_app

from app.delivery import engine


def deliver_batch(channel: str, delivery_ids: list[int]) -> dict:
    """Claim, re-check, render, send and record the rows (app/delivery/engine.py); return the counts."""
    return engine.deliver_batch(channel, delivery_ids, current_app.config)


def drain_deliveries(queue: str, channel: str) -> dict:
    """Send the live deliveries coalesced on (queue, channel) in batches (engine.drain); return the counts."""
    return engine.drain(queue, channel, current_app.config)
