"""GET /v1/users/<external_id>/counts: a member's unread and unseen badges (issue 15, item 6)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from app.api_keys import service as keys
from app.extensions import db
from app.inbox import queries
from tests.api.conftest import Api
from tests.factories import AnnouncementFactory, NotificationFactory, UserFactory


def _now():
    return db.session.execute(sa.text("SELECT now()")).scalar()


def _key(client, *scopes: str) -> Api:
    """An Api client whose key has exactly these scopes."""
    key = keys.create_api_key(None, "counts")
    db.session.execute(
        sa.text("UPDATE api_keys SET scopes = CAST(:s AS text[]) WHERE prefix = :p"),
        {"s": list(scopes), "p": keys.key_prefix(key)},
    )
    return Api(client, key)


@pytest.fixture
def member():
    """A member who last opened the inbox an hour ago: 2 unread rows before that, 3 after, 1 read after;
    one unread announcement before, one after."""
    user = UserFactory(external_id="counted-1")
    seen = _now() - timedelta(hours=1)
    db.session.execute(sa.text("INSERT INTO notification_last_seen VALUES (:u, :at)"), {"u": user.id, "at": seen})
    NotificationFactory.create_batch(2, user_id=user.id, created_at=seen - timedelta(minutes=5))
    NotificationFactory.create_batch(3, user_id=user.id, created_at=seen + timedelta(minutes=5))
    NotificationFactory(user_id=user.id, created_at=seen + timedelta(minutes=6), read_at=_now())
    AnnouncementFactory(published_at=seen - timedelta(minutes=1))
    AnnouncementFactory(published_at=seen + timedelta(minutes=1))
    return user


def test_counts_answers_both_badges(api, member):
    response = api.get("/v1/users/counted-1/counts")
    assert response.status_code == 200 and response.mimetype == "application/json"
    assert response.get_json() == {"unread": 2 + 3 + 2, "unseen": 3 + 1}
    assert response.headers["Cache-Control"] == "no-store"


def test_counts_are_capped_like_the_badge(api, member):
    db.session.execute(
        sa.text("""
        INSERT INTO notifications (user_id, type, title, body, dedupe_key, created_at)
        SELECT :u, 'comment', 'Bulk', 'b', 'bulk:' || n, now() FROM generate_series(1, 150) n"""),
        {"u": member.id},
    )
    assert api.get("/v1/users/counted-1/counts").get_json() == {"unread": 100 + 2, "unseen": 100 + 1}


def test_any_key_with_the_read_scope_reads_any_member_but_only_that_member(client, member):
    other = UserFactory(external_id="counted-2")
    NotificationFactory.create_batch(4, user_id=other.id)
    reader = _key(client, "notifications:read")  # it never sent them anything: counts are per member
    assert reader.get("/v1/users/counted-2/counts").get_json() == {"unread": 4 + 2, "unseen": 4 + 2}
    assert reader.get("/v1/users/counted-1/counts").get_json() == {"unread": 7, "unseen": 4}


def test_a_key_without_the_read_scope_gets_403_and_no_counts(client, member):
    sender = _key(client, "notifications:write", "users:write", "links:create")
    for external_id in ("counted-1", "nobody"):
        response = sender.get(f"/v1/users/{external_id}/counts")
        assert response.status_code == 403 and response.mimetype == "application/problem+json"
        body = response.get_json()
        assert body["scope"] == "notifications:read" and "unread" not in body
        assert 'error="insufficient_scope"' in response.headers["WWW-Authenticate"]


def test_an_unknown_member_is_404(api):
    response = api.get("/v1/users/nobody/counts")
    assert response.status_code == 404 and response.mimetype == "application/problem+json"
    assert response.get_json()["detail"] == "There is no user with this external id."


def test_an_operator_account_is_not_answered(api):
    UserFactory(external_id="ops-1", role="operator")
    response = api.get("/v1/users/ops-1/counts")
    assert response.status_code == 403 and "operator account" in response.get_json()["detail"]


def test_an_invalid_external_id_is_422(api):
    response = api.get("/v1/users/" + "x" * 300 + "/counts")
    assert response.status_code == 422 and response.get_json()["errors"][0]["field"] == "external_id"


def test_a_signed_in_session_is_not_an_api_key(client, login_as, member):
    login_as(member)
    response = client.get("/v1/users/counted-1/counts")
    assert response.status_code == 401 and "unread" not in response.get_data(as_text=True)


def test_the_counts_are_the_queries_and_the_spec_documents_them(api, member):
    expected = queries.badge_counts(member.id)
    assert api.get("/v1/users/counted-1/counts").get_json() == {"unread": expected.unread, "unseen": expected.unseen}
    spec = api.get("/v1/openapi.json").get_json()
    operation = spec["paths"]["/v1/users/{external_id}/counts"]["get"]
    assert operation["security"] == [{"bearerAuth": ["notifications:read"]}]
    assert set(operation["responses"]) >= {"200", "401", "403", "404", "422"}
    counts = spec["components"]["schemas"]["CountsOut"]
    assert set(counts["required"]) == {"unread", "unseen"}
