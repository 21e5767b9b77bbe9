"""GET /metrics reads sends, failures, latency, the DLQ and queue depths at scrape time."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.providers import PermanentError
from app.queueing import enqueue_deliveries
from jobs.delivery import deliver_batch


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
