"""POST /v1/users/<id>/login-links and the page behind the link: confirm, single use, 5 minutes, no session."""

from __future__ import annotations

from urllib.parse import urlsplit

import sqlalchemy as sa

from app.extensions import db


def _link_path(api, external_id: str) -> str:
    response = api.post(f"/v1/users/{external_id}/login-links")
    assert response.status_code == 201
    return urlsplit(response.get_json()["url"]).path


def _signed_in_as(client):
    with client.session_transaction() as sess:
        return sess.get("_user_id")


def test_link_is_created_for_a_member(api, app, recipient):
    response = api.post(f"/v1/users/{recipient.external_id}/login-links")
    assert response.status_code == 201
    body = response.get_json()
    assert body["url"].startswith(app.config["BASE_URL"] + "/login/link/")
    token = body["url"].rsplit("/", 1)[1]
    stored = db.session.execute(
        sa.text("SELECT token_hash, user_id, expires_at - created_at AS lifetime FROM login_links")
    ).one()
    assert stored.user_id == recipient.id and token not in stored.token_hash
    assert stored.lifetime.total_seconds() == 300


def test_get_shows_a_button_and_does_not_use_the_link(api, client, recipient):
    path = _link_path(api, recipient.external_id)
    for _ in range(2):  # a link scanner fetching it first changes nothing
        page = client.get(path)
        assert page.status_code == 200
        assert b"Continue to my inbox" in page.data and b'name="csrf_token"' in page.data
    assert _signed_in_as(client) is None


def test_post_signs_in_that_user_once(api, client, csrf, recipient):
    path = _link_path(api, recipient.external_id)
    client.get(path)
    response = client.post(path, headers=csrf())
    assert response.status_code == 302 and response.headers["Location"] == "/inbox"
    assert _signed_in_as(client) == str(recipient.id)
    client.post("/logout", headers=csrf())
    again = client.post(path, headers=csrf())
    assert again.status_code == 410
    assert b"no longer works" in again.data
    assert _signed_in_as(client) is None
    assert client.get(path).status_code == 410


def test_expired_link_gives_the_clear_page_and_no_session(api, client, csrf, recipient):
    path = _link_path(api, recipient.external_id)
    db.session.execute(sa.text("UPDATE login_links SET expires_at = now() - interval '1 second'"))
    assert client.get(path).status_code == 410
    response = client.post(path, headers=csrf())
    assert response.status_code == 410 and b"more than five minutes old" in response.data
    assert _signed_in_as(client) is None


def test_unknown_token_and_missing_csrf(client, csrf, api, recipient):
    assert client.get("/login/link/not-a-token").status_code == 410
    assert client.post("/login/link/not-a-token", headers=csrf()).status_code == 410
    path = _link_path(api, recipient.external_id)
    assert client.post(path).status_code == 400  # no CSRF token: refused, link still usable
    assert client.post(path, headers=csrf()).status_code == 302


def test_unknown_user_gets_404(api):
    response = api.post("/v1/users/nobody/login-links")
    assert response.status_code == 404 and response.mimetype == "application/problem+json"
