"""Chaos: the product's webhook receiver is down for 10 s while 200 events are produced; none is lost.

Real worker and sweeper processes; the receiver (tests/webhooks/receiver.py) verifies every request with
the standardwebhooks package and stores each webhook-id once; duplicates at the wire are allowed and
counted. Retries are shortened (0.5 s base, 2 s cap) and the breaker cools down in 1 s so recovery
is quick; the whole test stays well under a minute.
"""

from __future__ import annotations

import time

import pytest

from app.unitofwork import commit
from app.webhooks import service
from tests.support.waiting import wait_for
from tests.webhooks.helpers import register, rows
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.chaos

TOTAL = 200
OUTAGE_SECONDS = 10
ENV = dict(
    WEBHOOK_ALLOW_HTTP_ENDPOINTS="1",
    WEBHOOK_ALLOW_PRIVATE_ADDRESSES="1",
    WEBHOOK_TIMEOUT_SECONDS="1",
    RETRY_BASE_SECONDS="0.5",
    RETRY_CAP_SECONDS="2",
    RETRY_MAX_ATTEMPTS="50",
    BREAKER_FAILURES="5",
    BREAKER_WINDOW_SECONDS="10",
    BREAKER_COOLDOWN_SECONDS="1",
    BREAKER_PROBE_TIMEOUT_SECONDS="2",
    SWEEP_REQUEUE_AFTER_SECONDS="2",
    SWEEP_INTERVAL_SECONDS="0.5",
)


def test_receiver_down_for_10_s_while_200_events_are_produced(app, stack, monkeypatch, record_property):
    monkeypatch.setitem(app.config, "WEBHOOK_ALLOW_HTTP_ENDPOINTS", True)  # this process registers the endpoint
    monkeypatch.setitem(app.config, "WEBHOOK_ALLOW_PRIVATE_ADDRESSES", True)
    stack["env"].update(ENV)
    receiver = Receiver().start()
    try:
        with app.app_context():
            register(receiver, ["notification.created"])
        stack["start"]("worker", "worker")
        stack["start"]("sweeper", "sweep")
        receiver.stop()  # down: connections refused
        down_at = time.monotonic()
        with app.app_context():
            for i in range(TOTAL):
                service.emit("notification.created", {"notification_id": i, "user_id": i % 7})
                commit()
                time.sleep(OUTAGE_SECONDS * 0.8 / TOTAL)  # produced across the outage
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_at)))
        with app.app_context():
            tried = sum(r.attempts for r in rows())
        receiver.start()  # back on the same port
        back_at = time.monotonic()
        wait_for(lambda: len(receiver.store) >= TOTAL, 40, "all 200 events at the receiver")
        recovered = time.monotonic() - back_at
        time.sleep(1)  # anything still in flight shows up as a wire duplicate
        with app.app_context():
            final = rows()
        duplicates = receiver.wire.total() - len(receiver.wire)
        summary = (
            f"webhook outage: produced={TOTAL} stored={len(receiver.store)} wire={receiver.wire.total()} "
            f"duplicates={duplicates} rejected={receiver.rejected} tries_during_outage={tried} "
            f"recovered_in={recovered:.1f}s attempts={sum(r.attempts for r in final)}"
        )
        print(summary)
        record_property("chaos", summary)
        assert len(receiver.store) == TOTAL and receiver.rejected == 0
        assert {r.webhook_id for r in final} == set(receiver.store)  # every id once in the store, none lost
        assert all(r.status == "sent" for r in final)
        assert sorted(p["data"]["notification_id"] for p in receiver.store.values()) == list(range(TOTAL))
    finally:
        receiver.stop()
