"""Circuit breaker transitions on a hand-driven clock, with the state in the test Redis."""

from __future__ import annotations

import uuid

import pytest

from app.extensions import redis
from app.providers.breaker import CircuitBreaker, Settings, snapshot


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def make(app, clock):
    def _make(**settings):
        defaults = dict(failures=3, window=10.0, cooldown=30.0, probe_timeout=5.0)
        return CircuitBreaker(
            redis.realtime(), f"t-{uuid.uuid4().hex[:8]}", Settings(**{**defaults, **settings}), clock
        )

    with app.app_context():
        yield _make


def test_opens_after_n_failures_within_the_window(make, clock):
    breaker = make()
    breaker.failure()
    clock.now += 11  # the first failure leaves the 10 s window
    breaker.failure()
    breaker.failure()
    assert breaker.state() == "closed" and breaker.allow().allowed
    breaker.failure()
    assert breaker.state() == "open"
    permit = breaker.allow()
    assert not permit.allowed and permit.retry_at == clock.now + 30


def test_half_open_lets_exactly_one_probe_through_then_closes_on_success(make, clock):
    breaker = make()
    for _ in range(3):
        breaker.failure()
    clock.now += 29.9
    assert not breaker.allow().allowed
    clock.now += 0.1
    assert breaker.allow().allowed  # the probe
    assert breaker.state() == "half_open"
    second = breaker.allow()
    assert not second.allowed and second.retry_at == clock.now + 5  # until the probe's deadline
    breaker.success()
    assert breaker.state() == "closed" and breaker.allow().allowed


def test_failed_probe_reopens_for_another_cooldown(make, clock):
    breaker = make()
    for _ in range(3):
        breaker.failure()
    clock.now += 30
    assert breaker.allow().allowed
    breaker.failure()
    assert breaker.state() == "open"
    assert breaker.allow().retry_at == clock.now + 30


def test_a_lost_probe_is_replaced_after_the_probe_timeout(make, clock):
    breaker = make()
    for _ in range(3):
        breaker.failure()
    clock.now += 30
    assert breaker.allow().allowed  # this worker dies and never reports
    clock.now += 4.9
    assert not breaker.allow().allowed
    clock.now += 0.1
    assert breaker.allow().allowed


def test_transitions_are_counted_for_metrics(app, make, clock, client):
    breaker = make()
    for _ in range(3):
        breaker.failure()
    clock.now += 30
    breaker.allow()
    breaker.success()
    with app.app_context():
        states, counts = snapshot(redis.realtime())
    assert states[breaker.name] == "closed"
    assert {k[1:]: v for k, v in counts.items() if k[0] == breaker.name} == {
        ("closed", "open"): 1,
        ("open", "half_open"): 1,
        ("half_open", "closed"): 1,
    }
    body = client.get("/metrics").get_data(as_text=True)
    assert (
        f'hato_circuit_breaker_transitions_total{{from_state="closed",provider="{breaker.name}",to_state="open"}} 1.0'
        in body
    )
    assert f'hato_circuit_breaker_state{{provider="{breaker.name}",state="closed"}} 1.0' in body
