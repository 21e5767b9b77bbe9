"""Attack (issue 14, item 1): one member stops Web Push for everyone with their own push endpoint.

The attacker subscribes an endpoint on a push service they run (here a local one on its own port,
127.0.0.1:<evil> against the honest 127.0.0.1:<honest>; pauses and breakers are scoped per host:port)
and answers every message with 429 and a hostile Retry-After, or with 500s. The victim's messages on
the honest push service must still go out, in the same batch and later ones; the attacker's rows come
round again within RETRY_CAP_SECONDS and still end in the DLQ through normal tries.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from app.extensions import db, redis
from app.providers.breaker import CircuitBreaker, Settings
from app.providers.ratelimit import TokenBucket
from jobs.delivery import deliver_batch
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.delivery import reload
from tests.support.push import PushServer, add_subscription

CAP = 60  # RETRY_CAP_SECONDS in these tests
SLACK = 3  # seconds between the worker's clock and the assertion's

# Retry-After values an attacker's push service answers with. Valid ones are honoured up to the cap;
# the rest (not ASCII delta-seconds, not an HTTP-date) are ignored.
HOSTILE_RETRY_AFTER = {
    "ten_years": "315360000",
    "superscript_two": "\u00b2",  # str.isdigit() is true, float() raises
    "latin1_superscripts": "\u00b9\u00b2\u00b3",  # headers arrive as latin-1: these are the digit look-alikes
    "negative": "-1",
    "exponent": "1e9",
    "far_future_http_date": "Fri, 31 Dec 9999 23:59:59 GMT",
    "five_thousand_digits": "9" * 5000,  # float() is inf, int() refuses
    "garbage": "soon, maybe",
}


def push_type():
    return NotificationTypeFactory(type="security-alert", label="Alerts", default_push=True)


def push_row(user, type_):
    note = NotificationFactory(user_id=user.id, type=type_.type, title="Heads up", body="Something happened")
    delivery = DeliveryFactory(notification_id=note.id, channel="push")
    db.session.flush()
    return delivery


def breaker_state(app, scope: str | None = None) -> str:
    settings = Settings.from_config(app.config)
    if scope is None:
        return CircuitBreaker(redis.realtime(), "webpush", settings).state()
    return CircuitBreaker(redis.realtime(), "webpush", settings, scope=scope).state()


def scope_of(service) -> str:
    return service.origin.removeprefix("http://")


@pytest.fixture
def evil_push_service():
    """The attacker's own push service, on another port than the honest one."""
    with PushServer() as service:
        yield service


@pytest.fixture
def capped(app, monkeypatch):
    monkeypatch.setitem(app.config, "RETRY_CAP_SECONDS", CAP)


@pytest.mark.committed  # the engine records on its own connection: real commits
@pytest.mark.parametrize("retry_after", HOSTILE_RETRY_AFTER.values(), ids=HOSTILE_RETRY_AFTER.keys())
def test_hostile_retry_after_holds_back_only_the_attackers_push_service(
    app, vapid, capped, push_service, evil_push_service, retry_after
):
    attacker, victim = UserFactory(), UserFactory()
    evil = add_subscription(attacker, evil_push_service.subscribe())
    evil_push_service.answer[evil.endpoint] = (429, {"Retry-After": retry_after})
    add_subscription(victim, push_service.subscribe())
    type_ = push_type()
    rows = [push_row(attacker if i % 2 == 0 else victim, type_) for i in range(6)]  # attacker first, interleaved

    deliver_batch("push", [r.id for r in rows])  # must not raise

    now = datetime.now(UTC)
    victims, attackers = rows[1::2], rows[0::2]
    assert [reload(r).status for r in victims] == ["sent"] * 3
    assert len(push_service.received) == 3 and push_service.rejected == []
    for delivery in attackers:
        row = reload(delivery)
        assert row.status == "pending" and row.attempts <= 1
        assert row.next_attempt_at <= now + timedelta(seconds=CAP + SLACK)  # not ten years
    assert reload(attackers[0]).attempts == 1  # the one that was told to slow down spent its try
    # Nothing channel-wide: the webpush bucket is not paused and its breaker is closed.
    assert TokenBucket(redis.realtime(), "webpush", None).take() == 0
    assert breaker_state(app) == "closed"

    later = push_row(victim, type_)
    assert deliver_batch("push", [later.id]).get("sent") == 1
    assert reload(later).status == "sent" and len(push_service.received) == 4


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_repeated_500s_open_only_the_attackers_push_service_breaker(app, vapid, push_service, evil_push_service):
    failures = app.config["BREAKER_FAILURES"]
    attacker, victim = UserFactory(), UserFactory()
    evil = add_subscription(attacker, evil_push_service.subscribe())
    evil_push_service.answer[evil.endpoint] = (500, {})
    add_subscription(victim, push_service.subscribe())
    type_ = push_type()
    pairs = [(push_row(attacker, type_), push_row(victim, type_)) for _ in range(failures + 2)]
    attackers, victims = [a for a, _ in pairs], [v for _, v in pairs]

    deliver_batch("push", [r.id for pair in pairs for r in pair])

    now = datetime.now(UTC)
    assert [reload(r).status for r in victims] == ["sent"] * len(victims)
    assert len(push_service.received) == len(victims)
    tried, held = attackers[:failures], attackers[failures:]
    for delivery in tried:  # normal failures: a try each, backoff
        row = reload(delivery)
        assert (row.status, row.attempts) == ("pending", 1) and "500" in row.last_error
    cooldown = app.config["BREAKER_COOLDOWN_SECONDS"]
    for delivery in held:  # behind the attacker's open breaker: no try spent, back after the cooldown
        row = reload(delivery)
        assert (row.status, row.attempts) == ("pending", 0)
        assert row.next_attempt_at <= now + timedelta(seconds=min(cooldown, app.config["RETRY_CAP_SECONDS"]) + SLACK)
    assert breaker_state(app) == "closed"
    assert breaker_state(app, scope_of(push_service)) == "closed"
    assert breaker_state(app, scope_of(evil_push_service)) == "open"

    later_victim, later_attacker = push_row(victim, type_), push_row(attacker, type_)
    counts = deliver_batch("push", [later_victim.id, later_attacker.id])
    assert reload(later_victim).status == "sent"
    assert (reload(later_attacker).status, reload(later_attacker).attempts) == ("pending", 0)
    assert counts.get("sent") == 1


@pytest.mark.committed  # the engine records on its own connection: real commits
@pytest.mark.parametrize(
    "answer", [(429, {"Retry-After": "315360000"}), (500, {})], ids=["429_ten_years", "500_forever"]
)
def test_the_attackers_rows_still_reach_the_dlq(app, vapid, evil_push_service, monkeypatch, answer):
    monkeypatch.setitem(app.config, "RETRY_CAP_SECONDS", 1)
    monkeypatch.setitem(app.config, "RETRY_MAX_ATTEMPTS", 3)
    attacker = UserFactory()
    evil = add_subscription(attacker, evil_push_service.subscribe())
    evil_push_service.answer[evil.endpoint] = answer
    delivery = push_row(attacker, push_type())

    for _ in range(12):  # three tries, each at most a second apart, plus rounds held behind the pause
        deliver_batch("push", [delivery.id])
        row = reload(delivery)
        if row.status == "failed":
            break
        assert row.next_attempt_at <= datetime.now(UTC) + timedelta(seconds=1 + SLACK)
        time.sleep(max((row.next_attempt_at - datetime.now(UTC)).total_seconds(), 0) + 0.05)

    assert (row.status, row.error_kind, row.attempts) == ("failed", "exhausted", 3)
