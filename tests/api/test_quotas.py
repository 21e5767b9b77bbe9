"""Quotas per API key at POST /v1/notifications: 429 naming the limit, nothing written, a failed call refunded."""

from __future__ import annotations

import pytest

from app.api_keys import service as keys
from tests.api.conftest import count, new_key, send_body
from tests.factories import UserFactory


def limit(api_key: str, rate=None, burst=None, daily=None) -> None:
    keys.set_quota(None, keys.key_prefix(api_key), rate, burst, daily)
    keys.forget(keys.key_prefix(api_key))


@pytest.fixture
def members():
    return [UserFactory(external_id=f"q-{n}").external_id for n in range(4)]


def test_over_the_daily_quota_is_a_429_naming_it_and_nothing_is_written(api, api_key, comment_type, members):
    limit(api_key, daily=3)
    assert api.post("/v1/notifications", json=send_body(*members[:2])).status_code == 202

    refused = api.post("/v1/notifications", json=send_body(*members[2:]))

    assert refused.status_code == 429 and refused.mimetype == "application/problem+json"
    problem = refused.get_json()
    assert (problem["type"], problem["limit"], problem["subject"]) == (
        "urn:hato:problem:quota_exceeded", "daily", "api_key"
    )  # fmt: skip
    assert "1 of its 3 notifications left today" in problem["detail"]
    headers = refused.headers
    assert (headers["RateLimit-Limit"], headers["RateLimit-Remaining"]) == ("3", "1")
    assert headers["RateLimit-Policy"] == '"api-key-daily";q=3;w=86400'
    assert 0 < int(headers["Retry-After"]) <= 86400 and headers["RateLimit-Reset"] == headers["Retry-After"]
    assert count("notifications") == 2  # the refused call wrote nothing
    assert api.post("/v1/notifications", json=send_body(members[2])).status_code == 202  # the one left


def test_over_the_rate_is_a_429_with_retry_after(api, api_key, comment_type, members):
    limit(api_key, rate=1, burst=2)
    bodies = [send_body(members[0], title=f"Comment {n}") for n in range(4)]
    statuses = [api.post("/v1/notifications", json=body).status_code for body in bodies[:3]]
    assert statuses == [202, 202, 429]
    refused = api.post("/v1/notifications", json=bodies[3])
    problem = refused.get_json()
    assert (problem["limit"], problem["subject"], refused.headers["Retry-After"]) == ("rate", "api_key", "1")
    assert refused.headers["RateLimit-Policy"] == '"api-key-rate";q=2;w=1'
    assert count("notifications") == 2


def test_a_call_that_fails_gives_its_notifications_back(api, api_key, comment_type, members):
    limit(api_key, daily=2)
    assert api.post("/v1/notifications", json=send_body(*members[:2], type="no-such-type")).status_code == 422
    assert api.post("/v1/notifications", json=send_body(*members[:2])).status_code == 202


def test_a_replay_of_an_idempotent_call_costs_nothing(api, api_key, comment_type, members):
    limit(api_key, daily=2)
    key = new_key()
    first = api.post("/v1/notifications", json=send_body(*members[:2]), idempotency_key=key)
    again = api.post("/v1/notifications", json=send_body(*members[:2]), idempotency_key=key)
    assert (first.status_code, again.status_code, again.headers.get("Idempotent-Replayed")) == (202, 202, "true")


def test_a_key_without_limits_is_not_counted_and_other_keys_have_their_own(client, api, api_key, comment_type, members):
    limit(api_key, daily=1)
    other = keys.create_api_key(None, "other", ["notifications:write"])
    for _ in range(3):
        response = client.post(
            "/v1/notifications", json=send_body(members[0]), headers={"Authorization": f"Bearer {other}"}
        )
        assert response.status_code == 202
    assert api.post("/v1/notifications", json=send_body(members[0])).status_code == 202
    assert api.post("/v1/notifications", json=send_body(members[0])).status_code == 429
