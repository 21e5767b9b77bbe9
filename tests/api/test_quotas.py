"""Quotas per API key at POST /v1/notifications: 429 naming the limit, nothing written, a failed call refunded."""

from __future__ import annotations

import pytest

from app.api_keys import service as keys
from tests.api.conftest import count, new_key, send_body
from tests.factories import UserFactory


def limit(api_key: str, rate=None, burst=None, daily=None) -> None:
    keys.set_quota(None, keys.key_prefix(api_key), rate, burst, daily)
    keys.forget(keys.key_prefix(api_key))


def topic_body(**fields) -> dict:
    """POST /v1/notifications to the followers of project-42."""
    return {"type": "comment", "topic": "project-42", "title": "New comment", "body": "Hello", **fields}


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


@pytest.fixture
def acme_members(api):
    """Tenant acme with two members (q-0, q-1) and an outsider (q-2)."""
    from app.tenants import service as tenants

    UserFactory(external_id="q-2")
    assert api.put("/v1/tenants/acme", {"name": "Acme"}).status_code in (200, 201)
    for ref in ("q-0", "q-1"):
        UserFactory(external_id=ref)
        assert api.put(f"/v1/users/{ref}", {"tenants": ["acme"]}).status_code == 200
    return tenants


def test_a_tenants_daily_quota_counts_every_key_sending_for_it(client, api, comment_type, acme_members):
    acme_members.set_quota(None, "acme", None, None, 3)
    other = keys.create_api_key(None, "other", ["notifications:write"])
    assert api.post("/v1/notifications", json=send_body("q-0", "q-1", tenant="acme")).status_code == 202
    refused = client.post(
        "/v1/notifications", json=send_body("q-0", "q-1", tenant="acme"), headers={"Authorization": f"Bearer {other}"}
    )
    assert refused.status_code == 429
    problem = refused.get_json()
    assert (problem["limit"], problem["subject"], problem["tenant"]) == ("daily", "tenant", "acme")
    assert "Tenant acme has 1 of its 3 notifications left today" in problem["detail"]
    assert refused.headers["RateLimit-Policy"] == '"tenant-daily";q=3;w=86400'
    assert count("notifications") == 2
    assert api.post("/v1/notifications", json=send_body("q-0", title="Another")).status_code == 202  # no tenant


def test_a_tenants_rate_and_the_keys_quota_each_refuse_for_themselves(api, api_key, comment_type, acme_members):
    acme_members.set_quota(None, "acme", 1, 1, None)
    limit(api_key, daily=2)
    assert api.post("/v1/notifications", json=send_body("q-0", tenant="acme")).status_code == 202
    by_rate = api.post("/v1/notifications", json=send_body("q-1", tenant="acme"))
    assert (by_rate.status_code, by_rate.get_json()["limit"], by_rate.get_json()["subject"]) == (429, "rate", "tenant")
    assert by_rate.headers["RateLimit-Policy"] == '"tenant-rate";q=1;w=1'
    # the tenant's refusal took nothing from the key: it still has one notification left today
    assert api.post("/v1/notifications", json=send_body("q-1")).status_code == 202
    by_key = api.post("/v1/notifications", json=send_body("q-2", title="Third"))
    assert (by_key.status_code, by_key.get_json()["subject"]) == (429, "api_key")


def test_a_recipient_outside_the_tenant_gives_the_quota_back(api, comment_type, acme_members):
    acme_members.set_quota(None, "acme", None, None, 2)
    assert api.post("/v1/notifications", json=send_body("q-0", "q-2", tenant="acme")).status_code == 422
    assert api.post("/v1/notifications", json=send_body("q-0", "q-1", tenant="acme")).status_code == 202


def test_a_topic_counts_its_followers_and_over_the_quota_records_no_fanout(api, api_key, comment_type, members):
    assert api.put("/v1/topics/project-42", {"name": "Project 42"}).status_code in (200, 201)
    assert api.post("/v1/topics/project-42/subscribers", {"add": members[:3]}).status_code == 200
    limit(api_key, daily=4)

    first = api.post("/v1/notifications", json=topic_body(actor={"id": members[0], "name": "Quinn"}))
    assert first.status_code == 202 and first.get_json()["fanout"]["total"] == 2  # the actor left out

    over = api.post("/v1/notifications", json=topic_body(title="Again"))
    assert over.status_code == 429 and over.get_json()["limit"] == "daily"
    assert "2 of its 4 notifications left today" in over.get_json()["detail"]
    assert count("topic_fanouts") == 1  # the refused one recorded nothing


def test_a_topic_for_a_tenant_counts_the_followers_who_are_its_members_against_its_quota(
    api, comment_type, acme_members
):
    assert api.put("/v1/topics/project-42", {"name": "Project 42"}).status_code in (200, 201)
    assert api.post("/v1/topics/project-42/subscribers", {"add": ["q-0", "q-1", "q-2"]}).status_code == 200
    acme_members.set_quota(None, "acme", None, None, 3)

    first = api.post("/v1/notifications", json=topic_body(tenant="acme"))
    assert first.status_code == 202 and first.get_json()["fanout"]["total"] == 2  # q-2 is not acme's

    over = api.post("/v1/notifications", json=topic_body(tenant="acme", title="Again"))
    assert over.status_code == 429 and (over.get_json()["limit"], over.get_json()["subject"]) == ("daily", "tenant")
    assert count("topic_fanouts") == 1  # the refused one recorded nothing
