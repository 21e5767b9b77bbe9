"""send_digests(ids): the job that sends a batch of digest runs, one e-mail each."""

from __future__ import annotations

from flask import current_app

from app.digests import sending


def send_digests(run_ids: list[int]) -> dict:
    """Claim, render, send and record the runs (app/digests/sending.py); return the counts."""
    return sending.send_runs(run_ids, current_app.config)
