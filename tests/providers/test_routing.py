"""Routing through breaker + bucket + failover, and the delivery engine's use of it (fake providers)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from aiosmtpd.controller import Controller

from app.delivery import service
from app.extensions import db, redis
from app.models import DeliveryAttempt, EmailSuppression
from app.providers import TargetOutcome, TransientError, register
from app.providers.breaker import CircuitBreaker, Settings
from app.providers.fake import FakeProvider
from app.providers.routing import ROUTE_RECHECK_SECONDS, Router
from jobs.delivery import deliver_batch
from tests.factories import UserFactory
from tests.support.delivery import reload
from tests.support.smtp import SmtpSink
from tests.support.waiting import free_port

BACKUP = FakeProvider()
BACKUP.name = "fake_backup"
register("fake_backup")(lambda config: BACKUP)


def open_breaker(app, name: str) -> None:
    breaker = CircuitBreaker(redis.realtime(), name, Settings.from_config(app.config))
    for _ in range(app.config["BREAKER_FAILURES"]):
        breaker.failure()
    assert breaker.state() == "open"


def attempts_of(delivery):
    return db.session.execute(
        sa.select(DeliveryAttempt.provider, DeliveryAttempt.outcome)
        .where(DeliveryAttempt.delivery_id == delivery.id)
        .order_by(DeliveryAttempt.id)
    ).all()


def test_router_skips_an_open_provider_and_reports_when_none_is_left(app, fake_provider):
    primary, backup = fake_provider, BACKUP.reset()
    now = [time.time()]
    with app.app_context():
        router = Router([primary, backup], app.config, redis.realtime(), clock=lambda: now[0])
        assert router.route().provider is primary
        open_breaker(app, "fake")  # another worker's failures: this router sees them at its next look
        assert router.route().provider is primary
        now[0] += ROUTE_RECHECK_SECONDS
        assert router.route().provider is backup
        open_breaker(app, "fake_backup")
        now[0] += ROUTE_RECHECK_SECONDS
        route = router.route()
        assert route.provider is None
        assert abs(route.wait_until - (now[0] + app.config["BREAKER_COOLDOWN_SECONDS"])) < 2


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_failover_sends_through_the_next_provider_and_records_it(app, fake_provider, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "EMAIL_PROVIDER", "fake,fake_backup")
    monkeypatch.setitem(app.config, "BREAKER_FAILURES", 3)
    BACKUP.reset()
    deliveries = [make_delivery() for _ in range(6)]
    fake_provider.fail_next(TransientError("connection refused", kind="refused"), times=10)

    counts = deliver_batch("email", [d.id for d in deliveries])

    assert counts["pending"] == 3 and counts["sent"] == 3  # three failures open the breaker; the rest fail over
    assert [m.delivery_id for m in BACKUP.sent] == [d.id for d in deliveries[3:]]
    for delivery in deliveries[3:]:
        row = reload(delivery)
        assert (row.status, row.provider, row.attempts) == ("sent", "fake_backup", 1)
        assert attempts_of(delivery) == [("fake_backup", "sent")]
    assert attempts_of(deliveries[0]) == [("fake", "transient")]


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_no_provider_left_rows_wait_with_attempts_unchanged(app, fake_provider, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "EMAIL_PROVIDER", "fake,fake_backup")
    deliveries = [make_delivery() for _ in range(3)]
    BACKUP.reset()
    open_breaker(app, "fake")
    open_breaker(app, "fake_backup")

    assert deliver_batch("email", [d.id for d in deliveries])["waiting"] == 3

    soon = datetime.now(UTC) + timedelta(seconds=app.config["BREAKER_COOLDOWN_SECONDS"])
    for delivery in deliveries:
        row = reload(delivery)
        assert (row.status, row.attempts, row.locked_until) == ("pending", 0, None)
        assert abs((row.next_attempt_at - soon).total_seconds()) < 5
        assert attempts_of(delivery) == []
    assert fake_provider.calls == 0 and BACKUP.calls == 0


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_empty_bucket_defers_rows_without_burning_attempts(app, fake_provider, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "PROVIDER_RATE_FAKE", 2)
    monkeypatch.setitem(app.config, "PROVIDER_BURST_FAKE", 2)
    monkeypatch.setitem(app.config, "RATE_LIMIT_MAX_WAIT_SECONDS", 0)
    deliveries = [make_delivery() for _ in range(5)]

    counts = deliver_batch("email", [d.id for d in deliveries])

    assert (counts["sent"], counts["waiting"]) == (2, 3)
    waiting = [reload(d) for d in deliveries[2:]]
    assert all(row.status == "pending" and row.attempts == 0 for row in waiting)
    gaps = [(b.next_attempt_at - a.next_attempt_at).total_seconds() for a, b in zip(waiting, waiting[1:], strict=False)]
    assert all(abs(gap - 0.5) < 0.01 for gap in gaps)  # spaced one token apart


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_short_token_waits_are_slept_not_deferred(app, fake_provider, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "PROVIDER_RATE_FAKE", 20)
    monkeypatch.setitem(app.config, "PROVIDER_BURST_FAKE", 1)
    deliveries = [make_delivery() for _ in range(5)]
    started = time.monotonic()
    assert deliver_batch("email", [d.id for d in deliveries])["sent"] == 5
    assert time.monotonic() - started >= 0.18  # four waits of 50 ms


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_retry_after_is_honoured_and_pauses_the_provider(app, fake_provider, make_delivery):
    first, second = make_delivery(), make_delivery()
    fake_provider.fail_next(TransientError("SMTP 421 try again in 60 seconds", kind="smtp_421", retry_after=60))

    counts = deliver_batch("email", [first.id, second.id])

    assert (counts["pending"], counts["waiting"]) == (1, 1)
    one, two = reload(first), reload(second)
    assert one.attempts == 1 and one.next_attempt_at >= datetime.now(UTC) + timedelta(seconds=58)
    assert two.attempts == 0 and two.next_attempt_at >= datetime.now(UTC) + timedelta(seconds=58)
    assert CircuitBreaker(redis.realtime(), "fake", Settings()).state() == "closed"  # throttling is not an outage


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_hard_bounce_suppresses_the_address(app, smtp_sink, make_delivery):
    user = UserFactory(email="Gone@Example.com")
    smtp_sink.handler.reject["gone@example.com"] = "550 5.1.1 no such user"
    delivery = make_delivery(user=user)

    assert deliver_batch("email", [delivery.id])["failed"] == 1

    suppression = db.session.get(EmailSuppression, "gone@example.com")
    assert suppression.reason == "bounce" and "550" in suppression.detail
    again = make_delivery(user=user)
    assert deliver_batch("email", [again.id])["skipped"] == 1
    assert reload(again).skip_reason == "suppressed"


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_non_ascii_address_without_smtputf8_is_permanent(app, make_delivery, monkeypatch):
    sink = SmtpSink(free_port())
    sink.controller = Controller(sink.handler, hostname="127.0.0.1", port=sink.port, enable_SMTPUTF8=False)
    sink.start()
    monkeypatch.setitem(app.config, "SMTP_URL", sink.url)
    monkeypatch.setitem(app.config, "EMAIL_PROVIDER", "smtp")
    delivery = make_delivery(user=UserFactory(email="user@exämple.com"))
    try:
        assert deliver_batch("email", [delivery.id])["failed"] == 1
    finally:
        sink.stop()
    row = reload(delivery)
    assert (row.status, row.error_kind, row.attempts) == ("failed", "smtputf8_unsupported", 1)


def test_expired_lease_counts_an_attempt_and_the_last_one_fails(app, make_delivery):
    poison = make_delivery(status="sending", attempts=app.config["RETRY_MAX_ATTEMPTS"] - 1)
    other = make_delivery(status="sending", attempts=0)
    db.session.execute(
        sa.text("UPDATE notification_deliveries SET locked_until = now() - interval '1 second' WHERE id IN (:a, :b)"),
        {"a": poison.id, "b": other.id},
    )

    assert service.release_expired_leases(100, app.config["RETRY_MAX_ATTEMPTS"]) == 2

    dead, alive = reload(poison), reload(other)
    assert (dead.status, dead.error_kind, dead.attempts) == (
        "failed",
        "lease_expired",
        app.config["RETRY_MAX_ATTEMPTS"],
    )
    assert (alive.status, alive.attempts) == ("pending", 1)
    assert attempts_of(alive) == [("email", "transient")]


def test_a_target_scopes_pause_and_breaker_hold_back_only_its_own_targets(app, monkeypatch):
    monkeypatch.setitem(app.config, "RETRY_CAP_SECONDS", 60)

    class Scoped(FakeProvider):
        name = "scoped"

        @staticmethod
        def scope_of(target):
            return target.split("/")[0]

    provider = Scoped()
    with app.app_context():
        router = Router([provider], app.config, redis.realtime())
        targets = ("a:1/x", "a:1/y", "b:1/z")
        assert router.admit(provider, targets) == (targets, 0.0)

        router.report(provider, "transient", 315360000, (TargetOutcome("a:1", "transient", 315360000),))
        admitted, until = router.admit(provider, targets)
        assert admitted == ("b:1/z",) and time.time() < until <= time.time() + 60  # capped, not ten years
        assert router.admit(provider, ("a:1/x",))[0] == ()
        assert router.route().provider is provider  # the provider itself is not paused

        for _ in range(app.config["BREAKER_FAILURES"]):
            router.report(provider, "transient", None, (TargetOutcome("b:1", "transient"),))
        admitted, until = router.admit(provider, targets)
        assert admitted == () and time.time() < until <= time.time() + 60  # the sooner of pause and cooldown
        assert CircuitBreaker(redis.realtime(), "scoped", Settings()).state() == "closed"
        assert CircuitBreaker(redis.realtime(), "scoped", Settings(), scope="b:1").state() == "open"
        assert router.admit(provider, ("c:1/w",)) == (("c:1/w",), 0.0)


def test_a_failure_this_router_sees_makes_it_ask_again_at_once(app, fake_provider):
    primary, backup = fake_provider, BACKUP.reset()
    with app.app_context():
        router = Router([primary, backup], app.config, redis.realtime())
        assert router.route().provider is primary
        for _ in range(app.config["BREAKER_FAILURES"]):
            router.report(primary, "transient")

        assert router.route().provider is backup  # no waiting out the recheck window


def test_a_redis_that_forgot_the_scripts_still_routes(app, fake_provider):
    with app.app_context():
        router = Router([fake_provider], app.config, redis.realtime())
        assert router.route().provider is fake_provider
        redis.realtime().script_flush()
        router._clear_until.clear()
        assert router.route().provider is fake_provider


def test_a_providers_parts_keep_their_own_token_buckets(app, monkeypatch):
    """Push's parts (webpush, apns, fcm) are rate-limited by their own PROVIDER_RATE_<PART>, per message."""
    monkeypatch.setitem(app.config, "PROVIDER_RATE_APNS", 1)
    monkeypatch.setitem(app.config, "PROVIDER_BURST_APNS", 1)
    monkeypatch.setitem(app.config, "RATE_LIMIT_MAX_WAIT_SECONDS", 0)

    class Parts(FakeProvider):
        name = "parts"

        @staticmethod
        def part_of(target):
            return target.split(":")[0]

        @staticmethod
        def scope_of(target):
            return target.split(":")[0] + "-service"

    provider = Parts()
    with app.app_context():
        redis.client().flushdb()
        router = Router([provider], app.config, redis.realtime())
        both = ("apns:phone-1", "fcm:phone-2")
        assert router.admit(provider, both) == (both, 0.0)  # the one APNs token of the second
        admitted, until = router.admit(provider, both)
        assert admitted == ("fcm:phone-2",) and time.time() < until <= time.time() + 1.1  # APNs waits its token
        assert router.admit(provider, ("fcm:phone-3",) * 5) == (("fcm:phone-3",) * 5, 0.0)  # FCM has no rate
