"""Webhooks out end to end: the outbox, signed posts to a real receiver, retries, the DLQ, breakers, SSRF."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa
from flask import current_app

from app.delivery import engine
from app.extensions import db, redis
from app.refusal import Refused
from app.unitofwork import commit
from app.webhooks import service
from tests.webhooks.helpers import drain, register, rows
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.committed  # the engine records on its own autocommit connection


def test_an_event_reaches_the_receiver_signed_with_its_webhook_id(app, local_webhooks, receiver):
    register(receiver, ["preference.updated"])
    service.emit("preference.updated", {"user_id": 1, "type": "comment", "channel": "email", "enabled": False})
    service.emit("notification.read", {"user_id": 1, "notification_id": 2})  # nobody wants it: no row
    commit()
    [row] = rows()
    assert (row.status, row.event_type, row.webhook_id[:4]) == ("pending", "preference.updated", "msg_")

    assert drain() == [{"claimed": 1, "sent": 1}]

    assert receiver.rejected == 0 and receiver.wire == {row.webhook_id: 1}
    payload = receiver.store[row.webhook_id]
    assert payload["type"] == "preference.updated" and payload["data"]["enabled"] is False
    [sent] = rows()
    assert (sent.status, sent.attempts, sent.response_code) == ("sent", 1, 200)


def test_retries_keep_the_webhook_id_and_the_body(app, local_webhooks, receiver):
    register(receiver, ["notification.read"])
    answers = iter([500, 503, 200])
    receiver.answer = lambda _id: next(answers)
    service.emit("notification.read", {"user_id": 3, "notification_id": 9})
    commit()

    drain()

    [row] = rows()
    assert (row.status, row.attempts) == ("sent", 3)
    assert receiver.wire == {row.webhook_id: 3}  # three copies on the wire, one id
    assert list(receiver.store) == [row.webhook_id]
    codes = db.session.execute(
        sa.text("SELECT response_code, outcome FROM webhook_attempts WHERE delivery_id = :id ORDER BY id"),
        {"id": row.id},
    ).all()
    assert [tuple(c) for c in codes] == [(500, "transient"), (503, "transient"), (200, "sent")]


def test_a_4xx_goes_to_the_dlq_and_replay_sends_it_again_with_its_id(app, local_webhooks, receiver):
    endpoint = register(receiver, ["notification.archived"])
    receiver.answer = 400
    service.emit("notification.archived", {"user_id": 3, "notification_id": 9})
    commit()
    drain()
    [failed] = rows()
    assert (failed.status, failed.error_kind, failed.response_code) == ("failed", "rejected", 400)
    assert receiver.store == {}

    receiver.answer = 200
    assert service.replay_failed(endpoint) == 1
    commit()
    drain()

    [row] = rows()
    assert (row.status, row.webhook_id) == ("sent", failed.webhook_id)
    assert receiver.wire == {failed.webhook_id: 2} and list(receiver.store) == [failed.webhook_id]


def test_exhausted_retries_end_in_the_dlq(app, local_webhooks, receiver, monkeypatch):
    monkeypatch.setitem(app.config, "RETRY_MAX_ATTEMPTS", 2)
    register(receiver, ["notification.seen"])
    receiver.answer = 502
    service.emit("notification.seen", {"user_id": 3})
    commit()
    drain()
    [row] = rows()
    assert (row.status, row.error_kind, row.attempts) == ("failed", "exhausted", 2)


def test_a_failing_endpoint_is_broken_alone_and_a_slow_one_delays_no_other(app, local_webhooks, monkeypatch):
    monkeypatch.setitem(app.config, "BREAKER_FAILURES", 3)
    monkeypatch.setitem(app.config, "WEBHOOK_TIMEOUT_SECONDS", 0.5)
    good, bad, slow = Receiver().start(), Receiver().start(), Receiver().start()
    try:
        for r in (good, bad, slow):
            register(r, ["notification.seen"])
        bad.answer = 500
        slow.delay = 0.7  # past the timeout: every try waits the whole 0.5 s
        service.emit_many("notification.seen", [{"user_id": i} for i in range(10)])
        commit()
        ids = [r.id for r in rows()]
        started = time.monotonic()
        counts = engine.deliver_batch("webhook", ids, current_app.config)
        assert len(good.store) == 10
        assert good.arrivals[-1] - started < 1.0  # not behind the slow endpoint's ~5 s of timeouts
        assert bad.wire.total() == 3  # the breaker opened after 3 failures: the rest wait without a try
        assert counts["sent"] == 10 and counts["held"] >= 7
        held = rows("status = 'pending' AND held_since IS NOT NULL")
        assert len(held) >= 7 + 7  # bad's 7 after its breaker opened, and slow's after its own
    finally:
        for r in (good, bad, slow):
            r.stop()


def test_registration_refuses_what_push_refuses(app, monkeypatch):
    monkeypatch.setitem(app.config, "WEBHOOK_ALLOW_HTTP_ENDPOINTS", False)
    monkeypatch.setitem(app.config, "WEBHOOK_ALLOW_PRIVATE_ADDRESSES", False)
    refused = [
        "http://example.com/hook",
        "https://127.0.0.1/hook",
        "https://10.0.0.8/hook",
        "https://[::1]/h",
        "https://user:pw@example.com/hook",
        "https://example.com:8443/hook",
        "https://localhost/hook",
    ]
    for url in refused:
        with pytest.raises(Refused):
            service.create_endpoint(None, url, ["notification.seen"])
    with pytest.raises(Refused):
        service.create_endpoint(None, "https://example.com/hook", [])


def test_the_address_is_checked_again_at_send_time(app, local_webhooks, receiver, monkeypatch):
    register(receiver, ["notification.seen"])
    service.emit("notification.seen", {"user_id": 1})
    commit()
    monkeypatch.setitem(app.config, "WEBHOOK_ALLOW_PRIVATE_ADDRESSES", False)  # 127.0.0.1 is loopback
    drain()
    [row] = rows()
    assert (row.status, row.error_kind) == ("failed", "refused")
    assert receiver.wire.total() == 0


def test_a_disabled_endpoint_gets_nothing_new_and_holds_what_waits(app, local_webhooks, receiver):
    endpoint = register(receiver, ["notification.seen"])
    service.emit("notification.seen", {"user_id": 1})
    commit()
    service.update_endpoint(None, endpoint, ["notification.seen"], enabled=False)
    commit()
    assert service.emit("notification.seen", {"user_id": 2}) == 0
    assert service.send_test(endpoint) == 0
    commit()
    assert drain(rounds=1, force_due=False) == [{"claimed": 1, "held": 1}]
    [row] = rows()
    assert row.status == "pending" and row.held_since is not None and receiver.wire.total() == 0


def test_the_test_event_goes_to_one_endpoint(app, local_webhooks, receiver):
    other = Receiver().start()
    try:
        endpoint = register(receiver, ["notification.seen"])
        register(other, ["notification.seen"])
        assert service.send_test(endpoint) == 1
        commit()
        drain()
        assert receiver.types() == {"webhook.test": 1} and other.wire.total() == 0
    finally:
        other.stop()


def test_the_sweeper_re_enqueues_and_releases_expired_leases(app, local_webhooks, receiver):
    register(receiver, ["notification.seen"])
    service.emit("notification.seen", {"user_id": 1})
    commit()
    db.session.execute(
        sa.text("UPDATE webhook_deliveries SET status = 'sending', locked_until = now() - interval '1 s'")
    )
    commit()
    redis.client().flushdb()
    counts = service.sweep({**app.config, "SWEEP_REQUEUE_AFTER_SECONDS": 0})
    commit().wait()
    assert counts["webhooks_released"] == 1
    db.session.execute(sa.text("UPDATE webhook_deliveries SET next_attempt_at = now() - interval '1 s',"
                               " updated_at = now() - interval '1 min'"))  # fmt: skip
    commit()
    counts = service.sweep({**app.config, "SWEEP_REQUEUE_AFTER_SECONDS": 0})
    commit().wait()
    assert counts["webhooks_due"] == 1
    assert any(b"deliver_batch" in (v or b"") for k in redis.client().keys("*") if redis.client().type(k) == b"hash"
               for v in [redis.client().hget(k, "description")])  # fmt: skip


def test_parallel_workers_send_each_row_once(app, local_webhooks, receiver):
    register(receiver, ["notification.seen"])
    service.emit_many("notification.seen", [{"user_id": i} for i in range(40)])
    commit()
    ids = [r.id for r in rows()]

    def work():
        with app.app_context():
            engine.deliver_batch("webhook", ids, app.config)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert receiver.wire.total() == 40 and len(receiver.store) == 40
