"""Two workers claiming the same ids at the same moment get disjoint rows (FOR UPDATE SKIP LOCKED)."""

from __future__ import annotations

import threading

import pytest

from app.delivery import service
from app.extensions import db
from tests.support import load


@pytest.mark.committed
def test_concurrent_claims_are_disjoint(app):
    with app.app_context():
        ids = load.create_email_deliveries(400, prefix="race")
    barrier = threading.Barrier(4)
    claimed: list[list[int]] = []

    def worker():
        with app.app_context():
            barrier.wait()
            claim = service.claim("email", ids, 60)
            db.session.commit()
            claimed.append(claim.ids if claim else [])

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    every = [i for part in claimed for i in part]
    assert len(every) == len(set(every)) == len(ids)
