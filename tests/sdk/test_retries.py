"""Retries: a tiny local server answers 503 then 202; the call is tried again with the same Idempotency-Key."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from hato_client import APIConnectionError, AsyncHato, Hato, RateLimited, Retry, ServerError
from hato_client._base import retry_after

from tests.sdk.conftest import UNAVAILABLE
from tests.support import loops
from tests.support.waiting import free_port

BODY = {"type": "comment", "recipient": "ann", "title": "Hello"}


def test_a_503_is_retried_with_the_same_idempotency_key_and_the_next_call_gets_its_own(flaky):
    with Hato(flaky.url, "hato_key") as hato:
        assert hato.create_notifications(BODY)["created"] == 1
        first, retried = (seen["Idempotency-Key"] for seen in flaky.seen)
        assert first == retried and len(first) == 36  # a UUID, generated for the call
        hato.create_notifications(BODY)
        assert flaky.seen[2]["Idempotency-Key"] != first
        assert flaky.seen[0]["Authorization"] == "Bearer hato_key"


def test_the_async_client_keeps_the_key_too_and_gives_up_after_its_attempts(flaky):
    async def scenario():
        async with AsyncHato(flaky.url, "hato_key") as hato:
            await hato.create_notifications(BODY, idempotency_key="mine")
        flaky.plan = [UNAVAILABLE] * 2
        async with AsyncHato(flaky.url, "hato_key", retry=Retry(attempts=2)) as hato:
            with pytest.raises(ServerError) as failed:
                await hato.create_notifications(BODY)
        return failed.value

    error = loops.run(scenario())
    assert [seen["Idempotency-Key"] for seen in flaky.seen[:2]] == ["mine", "mine"]
    assert (error.status, error.detail, len(flaky.seen)) == (503, "Busy, try again.", 4)


def test_connection_errors_are_retried_with_backoff_then_raised(monkeypatch):
    waits = []
    monkeypatch.setattr(Hato, "_sleep", staticmethod(waits.append))
    with Hato(f"http://127.0.0.1:{free_port()}", "k", retry=Retry(attempts=3, base=0.5)) as hato:
        with pytest.raises(APIConnectionError):
            hato.create_notifications(BODY)
    assert len(waits) == 2 and 0 <= waits[0] <= 0.5 and 0 <= waits[1] <= 1.0


def test_full_jitter_is_bounded_by_the_cap_and_retry_after_reads_seconds_and_dates():
    policy, rng = Retry(base=0.5, cap=4.0), random.Random(7)
    waits = [policy.backoff(attempt, rng) for attempt in range(1, 9) for _ in range(50)]
    assert 0 <= min(waits) and max(waits) <= 4.0 and len(set(waits)) > 100
    now = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)
    assert retry_after("7", now) == 7.0
    assert retry_after("Fri, 04 Dec 2026 12:00:30 GMT", now) == 30.0
    assert retry_after("Fri, 04 Dec 2026 11:00:00 GMT", now) == 0.0
    assert retry_after("soon", now) is None and retry_after(None, now) is None


def test_a_retry_after_longer_than_the_policy_allows_is_raised_at_once(flaky):
    flaky.plan = [(429, {"Retry-After": "3600", "Content-Type": "application/problem+json"},
                   {"title": "Too Many Requests", "status": 429, "detail": "Daily quota."})]  # fmt: skip
    with Hato(flaky.url, "k") as hato:
        with pytest.raises(RateLimited) as refused:
            hato.create_notifications(BODY)
    assert (refused.value.status, refused.value.retry_after, len(flaky.seen)) == (429, 3600.0, 1)
