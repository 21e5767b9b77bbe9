"""POST/DELETE /push/subscriptions, the public VAPID key, the service worker and the preferences panel."""

from __future__ import annotations

import sqlalchemy as sa
from flask import g

from app.extensions import db
from app.models import PushSubscription
from tests.factories import UserFactory
from tests.support.html import attrs, one
from tests.support.push import PushService

SERVICE = PushService(origin="https://localhost")  # on the test allow-list (tests/conftest.py)


def subscription(endpoint: str | None = None) -> dict:
    data = SERVICE.subscribe()
    if endpoint:
        data["endpoint"] = endpoint
    return data


def switch_to(login_as, user) -> None:
    # The test's app context outlives each request, and Flask-Login caches the user on g.
    g.pop("_login_user", None)
    login_as(user)


def rows(user) -> list[PushSubscription]:
    db.session.expire_all()
    return db.session.scalars(sa.select(PushSubscription).where(PushSubscription.user_id == user.id)).all()


def test_subscribe_stores_the_users_subscription_and_upserts_by_endpoint(client, login_as, csrf):
    user = login_as(UserFactory())
    data = subscription()
    response = client.post("/push/subscriptions", json=data, headers=csrf())
    assert response.status_code == 201 and response.json["endpoint"] == data["endpoint"]
    renewed = {**subscription(data["endpoint"])}
    assert client.post("/push/subscriptions", json=renewed, headers=csrf()).status_code == 201
    [row] = rows(user)
    assert (row.endpoint, row.p256dh, row.auth) == (
        data["endpoint"],
        renewed["keys"]["p256dh"],
        renewed["keys"]["auth"],
    )


def test_resubscribing_revives_an_invalidated_subscription(client, login_as, csrf):
    user = login_as(UserFactory())
    data = subscription()
    client.post("/push/subscriptions", json=data, headers=csrf())
    db.session.execute(sa.update(PushSubscription).values(invalidated_at=sa.func.now()))
    client.post("/push/subscriptions", json=data, headers=csrf())
    assert rows(user)[0].invalidated_at is None


def test_subscribe_needs_csrf_and_a_session(client, login_as, csrf):
    assert client.post("/push/subscriptions", json=subscription(), headers=csrf()).status_code in (302, 401)
    user = login_as(UserFactory())
    assert client.post("/push/subscriptions", json=subscription()).status_code == 400
    assert rows(user) == []


def test_bad_subscriptions_get_a_clear_error_and_change_nothing(app, client, login_as, csrf, monkeypatch):
    user = login_as(UserFactory())
    good = subscription()
    cases = {
        "send the subscription as a JSON object": ["not", "an", "object"],
        "endpoint is missing": {**good, "endpoint": ""},
        "endpoint must be an https URL": {**good, "endpoint": "ftp://localhost/x"},
        "keys is missing": {"endpoint": good["endpoint"]},
        "keys.p256dh is not a valid key": {**good, "keys": {**good["keys"], "p256dh": "AAAA"}},
        "keys.auth is not a valid key": {**good, "keys": {**good["keys"], "auth": "@@@@"}},
    }
    for message, body in cases.items():
        response = client.post("/push/subscriptions", json=body, headers=csrf())
        assert response.status_code == 400 and message in response.json["detail"], (message, response.json)
    monkeypatch.setitem(app.config, "PUSH_ALLOW_HTTP_ENDPOINTS", False)  # production: only https endpoints
    local = client.post("/push/subscriptions", json=subscription("http://127.0.0.1:9999/push/x"), headers=csrf())
    assert local.status_code == 400 and "https" in local.json["detail"]
    assert rows(user) == []


def test_local_http_endpoints_are_allowed_in_tests(client, login_as, csrf):
    login_as(UserFactory())
    response = client.post("/push/subscriptions", json=subscription("http://127.0.0.1:9999/push/x"), headers=csrf())
    assert response.status_code == 201


def test_delete_removes_only_the_users_own_subscription(client, login_as, csrf):
    owner, other = UserFactory(), UserFactory()
    login_as(owner)
    data = subscription()
    client.post("/push/subscriptions", json=data, headers=csrf())
    switch_to(login_as, other)
    response = client.delete("/push/subscriptions", json={"endpoint": data["endpoint"]}, headers=csrf())
    assert response.status_code == 404
    assert len(rows(owner)) == 1
    switch_to(login_as, owner)
    assert client.delete("/push/subscriptions", json={"endpoint": data["endpoint"]}, headers=csrf()).status_code == 204
    assert rows(owner) == []
    assert client.delete("/push/subscriptions", json={}, headers=csrf()).status_code == 400


def test_vapid_public_key(client, app, vapid):
    assert client.get("/push/vapid-public-key").json == {"publicKey": vapid[0]}


def test_vapid_public_key_when_not_configured(client, app, monkeypatch):
    monkeypatch.setitem(app.config, "VAPID_PUBLIC_KEY", "")
    assert client.get("/push/vapid-public-key").status_code == 404


def test_service_worker_is_served_from_the_root(client):
    response = client.get("/sw.js")
    assert response.status_code == 200
    assert response.mimetype == "text/javascript"
    assert response.headers["Service-Worker-Allowed"] == "/"
    body = response.get_data(as_text=True)
    assert "showNotification" in body and "openWindow" in body and "focus()" in body


def test_preferences_page_has_the_push_panel(client, login_as, vapid):
    login_as(UserFactory())
    html = client.get("/preferences").get_data(as_text=True)
    assert one(html, "section#push button[data-push-subscribe]")
    assert any(src.endswith("js/push.js") for src in attrs(html, "script[src]", "src"))
    assert "<script>" not in html  # no inline script (CSP)


def test_preferences_page_without_vapid_says_push_is_off(client, login_as, app, monkeypatch):
    monkeypatch.setitem(app.config, "VAPID_PUBLIC_KEY", "")
    login_as(UserFactory())
    html = client.get("/preferences").get_data(as_text=True)
    assert "not set up on this server" in html and "data-push-subscribe" not in html
