"""Chaos: the primary SMTP server goes away for 12 s in the middle of 500 e-mails.

Real worker and sweeper processes, aiosmtpd sinks in their own processes, counting by Message-ID
across both sinks. The outage is 12 s instead of 30 s, with backoff (0.5 s base, 4 s cap) and breaker
(cool-down 2 s) shortened to match, so each test stays under a minute. Both providers are limited
to 25 messages/s by their token buckets, so the run lasts ~20 s and the outage falls in its middle.
"""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest
import sqlalchemy as sa

from app.extensions import db, redis
from app.providers.breaker import transitions_key
from app.queueing import enqueue_deliveries
from tests.support import load, processes
from tests.support.waiting import free_port, wait_for

pytestmark = pytest.mark.chaos

TOTAL = 500
OUTAGE_SECONDS = 12
DEADLINE_SECONDS = 75
ENV = dict(
    EMAIL_PROVIDER="smtp",
    DELIVERY_BATCH_SIZE="50",
    DELIVERY_LEASE_SECONDS="10",
    SWEEP_INTERVAL_SECONDS="0.5",
    SWEEP_REQUEUE_AFTER_SECONDS="3",
    SMTP_TIMEOUT="2",
    RETRY_BASE_SECONDS="0.5",
    RETRY_CAP_SECONDS="4",
    RETRY_MAX_ATTEMPTS="8",
    BREAKER_FAILURES="5",
    BREAKER_WINDOW_SECONDS="10",
    BREAKER_COOLDOWN_SECONDS="2",
    BREAKER_PROBE_TIMEOUT_SECONDS="4",
    PROVIDER_RATE_SMTP="25",
    PROVIDER_BURST_SMTP="5",
    PROVIDER_RATE_SMTP_FALLBACK="25",
    PROVIDER_BURST_SMTP_FALLBACK="5",
    PYTHONUNBUFFERED="1",
)


@pytest.fixture
def stack(app, tmp_path):
    """Primary and fallback sinks + worker/sweeper starter; everything started is stopped afterwards."""
    ports = {"primary": free_port(), "fallback": free_port()}
    logs = {name: tmp_path / f"{name}.log" for name in ports}
    procs: dict = {}

    def sink(name: str):
        procs[name] = processes.start_sink(ports[name], logs[name], tmp_path / f"{name}.out")

    def start(name: str, env: dict, *command: str):
        procs[name] = processes.spawn(processes.flask_args(*command), env, tmp_path / f"{name}.log.txt")

    base_env = dict(os.environ, **ENV, SMTP_URL=f"smtp://127.0.0.1:{ports['primary']}")
    with app.app_context():
        redis.client().flushdb()
    yield {
        "sink": sink,
        "start": start,
        "logs": logs,
        "procs": procs,
        "env": base_env,
        "fallback_url": f"smtp://127.0.0.1:{ports['fallback']}",
    }
    processes.stop_all(procs.values())
    with app.app_context():
        redis.client().flushdb()


def ledger_figures() -> dict:
    db.session.rollback()
    row = db.session.execute(
        sa.text(
            "SELECT count(*) FILTER (WHERE status = 'sent') AS sent,"
            " count(*) FILTER (WHERE status = 'failed') AS failed,"
            " sum(attempts) AS attempts, max(attempts) AS max_attempts,"
            " count(*) FILTER (WHERE provider = 'smtp_fallback' AND status = 'sent') AS via_fallback,"
            " count(*) FILTER (WHERE attempts = 0 AND status = 'sent') AS unused,"
            " array_agg(DISTINCT error_kind) FILTER (WHERE status = 'failed') AS kinds"
            " FROM notification_deliveries"
        )
    ).one()
    return dict(row._mapping)


def report(name: str, logs: dict, record_property, total: int) -> Counter:
    arrived = Counter(mid for log in logs.values() for mid in processes.message_ids(log))
    figures = ledger_figures()
    transitions = {k.decode(): int(v) for k, v in redis.realtime().hgetall(transitions_key()).items()}
    summary = (
        f"{name}: sent={len(arrived)} lost={total - len(arrived)} "
        f"duplicates={sum(n - 1 for n in arrived.values())} attempts={figures['attempts']} "
        f"(max {figures['max_attempts']} per row) via_fallback={figures['via_fallback']} "
        f"failed={figures['failed']} breaker={transitions}"
    )
    print(summary)
    record_property("chaos", summary)
    return arrived


def outage(stack, ids) -> None:
    """Let the primary take a fifth of the mail, stop it for OUTAGE_SECONDS, then start it again."""
    wait_for(lambda: len(processes.message_ids(stack["logs"]["primary"])) >= TOTAL // 5, 30, "the first 100 arrivals")
    processes.stop(stack["procs"]["primary"])
    stopped_at = len(processes.message_ids(stack["logs"]["primary"]))
    assert stopped_at < TOTAL, "everything was sent before the outage"
    time.sleep(OUTAGE_SECONDS)
    stack["sink"]("primary")


def test_outage_with_fallback_moves_traffic_and_loses_nothing(app, stack, record_property):
    env = dict(stack["env"], SMTP_FALLBACK_URL=stack["fallback_url"])
    stack["sink"]("primary")
    stack["sink"]("fallback")
    with app.app_context():
        ids = load.create_email_deliveries(TOTAL, prefix="outage-fb")
        assert enqueue_deliveries("default", "email", ids)
    for name in ("worker1", "worker2"):
        stack["start"](name, env, "worker")
    stack["start"]("sweeper", env, "sweep")

    outage(stack, ids)
    with app.app_context():
        wait_for(lambda: load.status_counts().get("sent", 0) == TOTAL, DEADLINE_SECONDS, "every row to be sent")
        arrived = report("outage with fallback", stack["logs"], record_property, TOTAL)
        figures = ledger_figures()
        transitions = redis.realtime().hgetall(transitions_key())
    assert set(arrived) == {f"<delivery-{i}@hato.127.0.0.1>" for i in ids}  # nothing lost, nothing foreign
    assert sum(n - 1 for n in arrived.values()) == 0  # nothing twice
    assert len(processes.message_ids(stack["logs"]["fallback"])) == figures["via_fallback"] > 0
    assert int(transitions.get(b"smtp|closed|open", 0)) >= 1
    # The breaker moved the traffic: the tries spent on the dead primary are the failures that open it, the
    # sends already in flight then (2 workers x DELIVERY_SEND_CONCURRENCY lanes hear of it late), and one per
    # failed half-open probe (one row can be the probe more than once, so the cap is per run, not per row).
    in_flight = 2 * int(env.get("DELIVERY_SEND_CONCURRENCY", app.config["DELIVERY_SEND_CONCURRENCY"]))
    failed_probes = int(transitions.get(b"smtp|half_open|open", 0))
    # Each time the breaker opened from closed (twice when a probe's success closed it before the outage
    # was over) cost its failures and the sends in flight then.
    openings = int(transitions.get(b"smtp|closed|open", 0))
    assert figures["attempts"] - TOTAL <= openings * (int(ENV["BREAKER_FAILURES"]) + in_flight) + failed_probes
    assert figures["max_attempts"] <= int(ENV["RETRY_MAX_ATTEMPTS"]) // 2  # no row spent more than half its tries


def test_outage_without_fallback_rows_wait_then_all_arrive(app, stack, record_property):
    stack["sink"]("primary")
    with app.app_context():
        ids = load.create_email_deliveries(TOTAL, prefix="outage-nofb")
        assert enqueue_deliveries("default", "email", ids)
    for name in ("worker1", "worker2"):
        stack["start"](name, stack["env"], "worker")
    stack["start"]("sweeper", stack["env"], "sweep")

    outage(stack, ids)
    with app.app_context():
        wait_for(lambda: load.status_counts().get("sent", 0) == TOTAL, DEADLINE_SECONDS, "every row to be sent")
        arrived = report("outage, no fallback", stack["logs"], record_property, TOTAL)
        figures = ledger_figures()
        transitions = redis.realtime().hgetall(transitions_key())
    assert set(arrived) == {f"<delivery-{i}@hato.127.0.0.1>" for i in ids}
    assert sum(n - 1 for n in arrived.values()) == 0
    assert int(transitions.get(b"smtp|closed|open", 0)) >= 1 and int(transitions.get(b"smtp|half_open|closed", 0)) >= 1
    assert figures["failed"] == 0 and figures["max_attempts"] < int(ENV["RETRY_MAX_ATTEMPTS"])


def test_sink_down_past_the_last_attempt_lands_rows_in_failed(app, stack, record_property):
    # The breaker is set out of reach here: an open breaker holds rows without spending their tries,
    # so only a provider failing below the breaker's threshold can exhaust them.
    env = dict(
        stack["env"],
        BREAKER_FAILURES="100000",
        RETRY_MAX_ATTEMPTS="3",
        RETRY_BASE_SECONDS="0.2",
        RETRY_CAP_SECONDS="0.5",
    )
    total = 50
    with app.app_context():
        ids = load.create_email_deliveries(total, prefix="outage-dead")
        assert enqueue_deliveries("default", "email", ids)
    stack["start"]("worker", env, "worker")
    stack["start"]("sweeper", env, "sweep")
    with app.app_context():
        wait_for(lambda: load.status_counts().get("failed", 0) == total, 45, "every row to fail")
        figures = ledger_figures()
        report("sink never up", stack["logs"], record_property, total)
    assert figures["kinds"] == ["exhausted"] and figures["max_attempts"] == 3 and figures["attempts"] == 3 * total
