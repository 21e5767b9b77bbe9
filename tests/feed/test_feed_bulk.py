"""Bulk actions in the feed API (issue 33): POST /v1/feed/bulk and /v1/feed/undo, scoped like every feed write."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from tests.factories import NotificationFactory, UserFactory
from tests.feed.test_feed_api import _feed, _key, _token
from tests.tenants.test_scoped_feed import token as scoped_token
from tests.tenants.test_scoped_feed import world  # noqa: F401 - a fixture


@pytest.fixture
def issuer(client):
    return _key(client, "feed:issue")


@pytest.fixture
def member():
    return UserFactory(external_id="bell-user")


def _now():
    return db.session.execute(sa.text("SELECT now()")).scalar()


def _state(notification_id: int):
    return db.session.execute(
        sa.text("SELECT read_at IS NOT NULL, archived_at IS NOT NULL, in_app FROM notifications WHERE id = :id"),
        {"id": notification_id},
    ).one()


def _bulk(client, token: str, body: dict, path: str = "/bulk"):
    return _feed(client, token, "POST", path, json=body)


def test_archive_by_ids_then_undo(client, issuer, member):
    rows = NotificationFactory.create_batch(3, user_id=member.id)
    token = _token(issuer)
    response = _bulk(client, token, {"action": "archive", "ids": [rows[0].id, rows[1].id]})
    body = response.get_json()
    assert response.status_code == 200
    assert (body["changed"], body["ids"], body["counts"]["unread"]) == (2, sorted([rows[0].id, rows[1].id]), 1)
    assert body["undo"]["expires_in"] == 10 and body["undo"]["token"]
    undone = _bulk(client, token, {"token": body["undo"]["token"]}, "/undo")
    assert undone.status_code == 200 and undone.get_json() == {
        "restored": 2,
        "counts": {**body["counts"], "unread": 3, "badge": 3, "unseen": 3},
    }
    assert _bulk(client, token, {"token": body["undo"]["token"]}, "/undo").status_code == 404  # used


def test_mark_all_read_and_delete_all_read(client, issuer, member):
    unread = NotificationFactory(user_id=member.id)
    read = NotificationFactory(user_id=member.id, read_at=_now())
    token = _token(issuer)
    deleted = _bulk(client, token, {"action": "delete", "all": True}).get_json()
    assert deleted["ids"] == [read.id] and tuple(_state(read.id)) == (True, False, False)
    assert [n["id"] for n in _feed(client, token).get_json()["notifications"]] == [unread.id]
    assert _bulk(client, token, {"action": "read", "all": True}).get_json()["changed"] == 1
    again = _bulk(client, token, {"action": "read", "all": True}).get_json()
    assert (again["changed"], again["undo"]) == (0, None)


def test_other_members_ids_are_ignored(client, issuer, member):
    theirs = NotificationFactory(user_id=UserFactory().id)
    body = _bulk(client, _token(issuer), {"action": "delete", "ids": [theirs.id]}).get_json()
    assert (body["changed"], body["ids"]) == (0, []) and tuple(_state(theirs.id)) == (False, False, True)


def test_a_tenant_scoped_token_touches_and_undoes_only_its_tenants_rows(client, issuer, world):  # noqa: F811
    rows = world["rows"]
    acme = scoped_token(issuer, "acme")
    body = _bulk(client, acme, {"action": "archive", "ids": list(rows.values())}).get_json()
    assert body["ids"] == [rows["acme"]]
    assert _bulk(client, acme, {"action": "delete", "all": True, "filter": "archived"}).get_json()["ids"] == [
        rows["acme"]
    ]
    assert tuple(_state(rows["globex"])) == (False, False, True) and tuple(_state(rows["none"])) == (False, False, True)


@pytest.mark.parametrize(
    "body",
    [
        {"action": "archive"},  # neither ids nor all
        {"action": "archive", "ids": [1], "all": True},  # both
        {"action": "archive", "ids": []},
        {"action": "burn", "ids": [1]},
        {"action": "archive", "ids": ["1"]},
        {"action": "archive", "ids": [1.5]},
        {"action": "archive", "ids": [True]},
        {"action": "archive", "all": True, "filter": "snoozed"},
    ],
)
def test_bad_bodies_are_422(client, issuer, member, body):
    response = _bulk(client, _token(issuer), body)
    assert response.status_code == 422 and response.mimetype == "application/problem+json"


def test_an_oversized_id_list_is_a_clear_422_that_changes_nothing(app, client, issuer, member, monkeypatch):
    spec = client.get("/v1/openapi.json").get_json()  # built once per process: it states the setting in force then
    maximum = app.config["INBOX_BULK_MAX_IDS"]
    assert spec["components"]["schemas"]["BulkIn"]["properties"]["ids"]["maxItems"] == maximum
    monkeypatch.setitem(app.config, "INBOX_BULK_MAX_IDS", 2)
    rows = NotificationFactory.create_batch(3, user_id=member.id)
    response = _bulk(client, _token(issuer), {"action": "read", "ids": [r.id for r in rows]})
    body = response.get_json()
    assert response.status_code == 422 and body["errors"][0]["field"] == "ids" and "at most 2 ids" in body["detail"]
    assert all(not _state(r.id)[0] for r in rows)


def test_an_unknown_token_is_404_and_bulk_needs_a_user_token(client, issuer, member):
    assert _bulk(client, _token(issuer), {"token": "nope"}, "/undo").status_code == 404
    assert _bulk(client, issuer.key, {"action": "read", "all": True}).status_code == 401  # an API key is not one
    assert _bulk(client, None, {"action": "read", "all": True}).status_code == 401
