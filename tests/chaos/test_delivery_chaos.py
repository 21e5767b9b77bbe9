"""Chaos: kill -9 a worker mid-batch, FLUSHDB Redis mid-run. PostgreSQL is the truth: nothing is lost.

Each test sends 1,000 e-mails through real worker and sweeper processes to an aiosmtpd sink running
in its own process, and counts what arrived by Message-ID. Bounded: 120 s each at most.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest

from app.extensions import redis
from app.queueing import enqueue_deliveries
from tests.support import load, processes
from tests.support.waiting import wait_for

pytestmark = pytest.mark.chaos

TOTAL = 1000
DEADLINE_SECONDS = 120


def report(name: str, log, record_property) -> Counter:
    arrived = Counter(processes.message_ids(log))
    duplicates = sum(n - 1 for n in arrived.values())
    summary = f"{name}: sent={len(arrived)} lost={TOTAL - len(arrived)} duplicates={duplicates}"
    print(summary)
    record_property("chaos", summary)
    return arrived


def test_kill_9_worker_mid_batch_loses_nothing(app, stack, record_property):
    with app.app_context():
        ids = load.create_email_deliveries(TOTAL, prefix="chaos-kill")
        assert enqueue_deliveries("default", "email", ids)
    worker = stack["start"]("worker1", "worker")

    # Mid-batch: past the first 100-row batch, inside the second or third.
    wait_for(lambda: len(processes.message_ids(stack["log"])) >= 150, 60, "the first worker to send 150")
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(5)
    killed_at = len(processes.message_ids(stack["log"]))
    assert killed_at < TOTAL, "the worker finished before it could be killed"

    stack["start"]("worker2", "worker")
    stack["start"]("sweeper", "sweep")
    with app.app_context():
        wait_for(lambda: load.status_counts().get("sent", 0) == TOTAL, DEADLINE_SECONDS, "every row to be sent")

    arrived = report(f"kill -9 after {killed_at} arrivals", stack["log"], record_property)
    expected = {f"<delivery-{i}@hato.127.0.0.1>" for i in ids}
    assert set(arrived) == expected  # none lost, nothing foreign
    assert sum(n - 1 for n in arrived.values()) <= 1  # at most the one message in flight at the kill


def test_flushdb_mid_run_is_recovered_by_the_sweeper(app, stack, record_property):
    with app.app_context():
        ids = load.create_email_deliveries(TOTAL, prefix="chaos-flush")
        assert enqueue_deliveries("default", "email", ids)
    stack["start"]("worker", "worker")
    stack["start"]("sweeper", "sweep")

    wait_for(lambda: len(processes.message_ids(stack["log"])) >= 150, 60, "the worker to send 150")
    with app.app_context():
        redis.client().flushdb()  # this test's own Redis database only; never FLUSHALL
        flushed_at = len(processes.message_ids(stack["log"]))
        assert flushed_at < TOTAL, "everything was sent before the flush"
        wait_for(lambda: load.status_counts().get("sent", 0) == TOTAL, DEADLINE_SECONDS, "every row to be sent")

    arrived = report(f"FLUSHDB after {flushed_at} arrivals", stack["log"], record_property)
    assert set(arrived) == {f"<delivery-{i}@hato.127.0.0.1>" for i in ids}
    assert sum(n - 1 for n in arrived.values()) == 0
