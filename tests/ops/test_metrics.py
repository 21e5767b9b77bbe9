"""GET /metrics reads sends, failures, latency, the DLQ and queue depths at scrape time."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app import backpressure
from app.providers import PermanentError
from app.queueing import enqueue_deliveries
from jobs.delivery import deliver_batch
from tests.support.backpressure import forget_measurements, queued_job


def samples(client):
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.get_data(as_text=True))
        for s in family.samples
    }


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_metrics_reflect_the_ledger(app, client, fake_provider, make_delivery):
    from app.extensions import redis

    redis.client().flushdb()
    ok, bad = make_delivery(), make_delivery()
    deliver_batch("email", [ok.id])
    fake_provider.fail_next(PermanentError("no", kind="rejected"))
    deliver_batch("email", [bad.id])
    make_delivery()
    with app.app_context():
        enqueue_deliveries("low", "email", [1, 2, 3])

    got = samples(client)

    assert got[("hato_delivery_attempts_total", (("outcome", "sent"), ("provider", "fake")))] == 1
    assert got[("hato_delivery_attempts_total", (("outcome", "permanent"), ("provider", "fake")))] == 1
    assert got[("hato_deliveries_sent_total", (("channel", "email"),))] == 1
    assert got[("hato_dlq_size", (("channel", "email"), ("error_kind", "rejected")))] == 1
    assert got[("hato_deliveries", (("channel", "email"), ("status", "pending")))] == 1
    assert got[("hato_delivery_attempt_duration_seconds_count", (("provider", "fake"),))] == 2
    assert got[("hato_delivery_attempt_duration_seconds_bucket", (("le", "+Inf"), ("provider", "fake")))] == 2
    assert got[("hato_queue_depth", (("queue", "low"),))] == 1
    assert got[("hato_queue_depth", (("queue", "high"),))] == 0
    assert got[("hato_redis_up", ())] == 1
    redis.client().flushdb()


def test_metrics_still_answer_when_redis_is_down(app, client, monkeypatch):
    from redis.exceptions import ConnectionError as RedisConnectionError

    from app.ops import metrics as metrics_module

    def down(name):
        raise RedisConnectionError("connection refused")

    monkeypatch.setattr(metrics_module, "get_queue", down)

    got = samples(client)

    assert got[("hato_redis_up", ())] == 0
    assert not any(name == "hato_queue_depth" for name, _ in got)


@pytest.mark.committed
def test_metrics_show_a_paused_channel_and_what_waits_for_it(app, client, fake_provider, make_delivery):
    from app.delivery import switches
    from app.unitofwork import commit

    waiting = make_delivery()
    switches.pause(None, "email", "", "relay migration", app.config)
    switches.pause(None, "push", "webpush", "vendor outage", app.config)
    commit()
    deliver_batch("email", [waiting.id])

    got = samples(client)

    assert got[("hato_channel_paused", (("channel", "email"), ("provider", "")))] == 1
    assert got[("hato_channel_paused", (("channel", "push"), ("provider", "webpush")))] == 1
    assert got[("hato_channel_waiting", (("channel", "email"),))] == 1


def test_queue_lags_and_backpressure_are_exported(app, client, monkeypatch):
    forget_measurements(monkeypatch)
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 2.0)
    job_id = queued_job("high", waited=5)
    queued_job("low", waited=20)

    got = samples(client)

    assert 5 <= got[("hato_queue_lag_seconds", (("queue", "high"),))] < 6
    assert 20 <= got[("hato_queue_lag_seconds", (("queue", "low"),))] < 21
    assert got[("hato_queue_lag_seconds", (("queue", "default"),))] == 0
    assert got[("hato_backpressure_active", ())] == 1
    assert got[("hato_backpressure_threshold_seconds", ())] == 2
    assert got[("hato_backpressure_holds_total", ())] == 1
    assert got[("hato_backpressure_since_seconds", ())] == pytest.approx(backpressure.status().since.timestamp())

    from app.queueing import get_queue

    get_queue("high").remove(job_id)
    got = samples(client)
    assert got[("hato_backpressure_active", ())] == 0 and got[("hato_backpressure_holds_total", ())] == 1
    assert ("hato_backpressure_since_seconds", ()) not in got
