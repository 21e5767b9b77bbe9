"""POST /v1/notifications counts the API rate limit and its quotas in one Redis round trip, with what each said."""

from __future__ import annotations

import pytest

from app.api_keys import service as keys
from app.extensions import limiter
from app.quotas import counter
from app.ratelimit_storage import HitAwareRedisStorage
from tests.api.conftest import count, new_key, send_body
from tests.api.test_quotas import limit
from tests.factories import UserFactory


@pytest.fixture
def members():
    return [UserFactory(external_id=f"rt-{n}").external_id for n in range(3)]


@pytest.fixture
def round_trips(monkeypatch):
    """Every call that counts a limit in Redis: the limiter storage's own hits and the quotas' scripts."""
    calls: list[str] = []
    incr, script = HitAwareRedisStorage.incr, counter._script

    def spied_incr(self, *args, **kwargs):
        calls.append("api-limit")
        return incr(self, *args, **kwargs)

    def spied_script():
        calls.append("quota-script")
        return script()

    monkeypatch.setattr(HitAwareRedisStorage, "incr", spied_incr)
    monkeypatch.setattr(counter, "_script", spied_script)
    return calls


def api_counters(redis_client) -> list[int]:
    return [int(redis_client.get(key)) for key in sorted(redis_client.keys("*api-key*/api/*"))]


def test_an_ingest_with_quotas_counts_everything_in_one_round_trip(
    app, api, api_key, comment_type, members, round_trips, redis_client, monkeypatch
):
    monkeypatch.setitem(app.config, "API_RATE_LIMIT", "5 per minute; 50 per hour")
    limit(api_key, rate=100, burst=100, daily=100)
    answers = [api.post("/v1/notifications", json=send_body(members[0], title=f"N{n}")) for n in range(2)]
    assert [a.status_code for a in answers] == [202, 202]
    assert round_trips == ["quota-script", "quota-script"]  # one per call, for the limit and the quotas
    assert api_counters(redis_client) == [2, 2]  # both windows counted, under Flask-Limiter's own keys
    assert (answers[1].headers["RateLimit-Limit"], answers[1].headers["RateLimit-Remaining"]) == ("5", "3")
    assert 0 < int(answers[1].headers["RateLimit-Reset"]) <= 60


def test_over_the_api_limit_the_ingest_is_a_429_of_that_limit_and_takes_no_quota(
    app, api, api_key, comment_type, members, monkeypatch
):
    monkeypatch.setitem(app.config, "API_RATE_LIMIT", "2 per minute")
    limit(api_key, daily=10)
    statuses = [api.post("/v1/notifications", json=send_body(members[n])).status_code for n in range(2)]
    refused = api.post("/v1/notifications", json=send_body(members[2]))
    assert statuses == [202, 202] and refused.status_code == 429
    assert refused.mimetype == "application/problem+json"
    assert (refused.headers["RateLimit-Limit"], refused.headers["RateLimit-Remaining"]) == ("2", "0")
    assert 0 < int(refused.headers["Retry-After"]) <= 60
    assert "RateLimit-Policy" not in refused.headers  # the shared API limit, not a quota
    assert count("notifications") == 2
    monkeypatch.setitem(app.config, "API_RATE_LIMIT", "100 per minute")  # a new limit: new windows
    [left] = counter.take(keys.authenticate(api_key).quotas(), 8)
    assert left.notifications == 0  # 2 taken by the calls, none by the refused one


def test_a_key_without_quotas_is_still_counted_in_one_trip(
    app, api, api_key, comment_type, members, round_trips, redis_client, monkeypatch
):
    monkeypatch.setitem(app.config, "API_RATE_LIMIT", "1 per minute")
    assert api.post("/v1/notifications", json=send_body(members[0])).status_code == 202
    assert api.post("/v1/notifications", json=send_body(members[1])).status_code == 429
    assert round_trips == ["quota-script", "quota-script"] and api_counters(redis_client) == [2]
    assert count("notifications") == 1


def test_a_call_that_ends_before_its_quotas_is_counted_as_it_ends(
    app, api, api_key, comment_type, members, round_trips, redis_client, monkeypatch
):
    monkeypatch.setitem(app.config, "API_RATE_LIMIT", "10 per minute")
    key = new_key()
    assert api.post("/v1/notifications", json=send_body(members[0]), idempotency_key=key).status_code == 202
    replay = api.post("/v1/notifications", json=send_body(members[0]), idempotency_key=key)
    refused_body = api.post("/v1/notifications", json={"type": "comment"})
    assert (replay.status_code, refused_body.status_code) == (202, 422)
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert api_counters(redis_client) == [3]  # the replay and the refused body count too
    assert (replay.headers["RateLimit-Remaining"], refused_body.headers["RateLimit-Remaining"]) == ("8", "7")
    assert round_trips == ["quota-script", "api-limit", "api-limit"]


def test_other_calls_and_a_limit_stored_elsewhere_count_at_once(
    app, api, api_key, comment_type, members, round_trips, monkeypatch
):
    monkeypatch.setitem(app.config, "API_RATE_LIMIT", "10 per minute")
    assert api.get("/v1/notifications/1").status_code == 404
    assert round_trips == ["api-limit"]
    round_trips.clear()
    server, number = limiter.limiter.storage.uri.rsplit("/", 1)
    elsewhere = HitAwareRedisStorage(f"{server}/{(int(number) + 1) % 16}")  # another database: not the realtime store
    monkeypatch.setattr(limiter, "_storage", elsewhere)
    monkeypatch.setattr(limiter, "_limiter", type(limiter.limiter)(elsewhere))
    try:
        assert api.post("/v1/notifications", json=send_body(members[0])).status_code == 202
        assert round_trips == ["api-limit"]  # counted in the guard; no quotas, so no script
    finally:
        elsewhere.reset()


def test_while_the_quota_store_is_away_the_limit_counts_its_own_way(
    app, api, api_key, comment_type, members, monkeypatch
):
    monkeypatch.setitem(app.config, "API_RATE_LIMIT", "1 per minute")
    monkeypatch.setattr(counter, "take_counting", lambda windows, quotas, cost: None)  # as when the store fails
    limit(api_key, daily=5)
    assert api.post("/v1/notifications", json=send_body(members[0])).status_code == 202
    refused = api.post("/v1/notifications", json=send_body(members[1]))
    assert refused.status_code == 429 and refused.headers["RateLimit-Limit"] == "1"  # the API limit, from its storage
    assert "RateLimit-Policy" not in refused.headers and count("notifications") == 1
