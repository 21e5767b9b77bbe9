"""The sweeper's analytics step: fold the waiting ledger changes into the rollups, one committed batch at a time."""

from __future__ import annotations

import time
from collections.abc import Mapping

from app.analytics import service
from app.extensions import db


def sweep(config: Mapping, seconds: float | None = None) -> int:
    """Fold batches until the queue is empty or the pass's time is up; return how many changes were folded.

    Needs no sweeper lock: batches take their rows with SKIP LOCKED, so passes side by side fold disjoint changes.
    """
    batch = int(config["ANALYTICS_ROLLUP_BATCH"])
    deadline = time.monotonic() + float(config["ANALYTICS_ROLLUP_PASS_SECONDS"] if seconds is None else seconds)
    total = 0
    while True:
        try:
            folded = service.roll_up(batch)
            db.session.commit()
        except BaseException:
            db.session.rollback()
            raise
        total += folded
        if folded < batch or time.monotonic() >= deadline:
            return total
