"""Sign-in, sign-out, rate limits, CSRF and the role guard."""

import pytest

from app.auth.access import operator_required
from tests.factories import UserFactory


def _login(client, csrf, email, password, **kwargs):
    return client.post("/login", data={"email": email, "password": password}, headers=csrf(), **kwargs)


def test_login_page_renders(client):
    response = client.get("/login")
    assert response.status_code == 200
    assert b'name="csrf_token"' in response.data


def test_right_password_starts_a_session(client, csrf, password):
    user = UserFactory()
    response = _login(client, csrf, user.email.upper(), password)
    assert response.status_code == 302
    assert response.headers["Location"] == "/inbox"
    with client.session_transaction() as sess:
        assert sess["_user_id"] == str(user.id)
    assert client.get("/inbox").status_code == 200


def test_wrong_password_shows_one_generic_message_and_no_session(client, csrf):
    user = UserFactory()
    wrong = _login(client, csrf, user.email, "not the password")
    unknown = _login(client, csrf, "nobody@example.com", "not the password")
    for response in (wrong, unknown):
        assert response.status_code == 401
        assert b"The e-mail or password is not right" in response.data
    with client.session_transaction() as sess:
        assert "_user_id" not in sess
    assert client.get("/inbox").status_code == 302


def test_sixth_wrong_password_in_a_minute_gets_429(client, csrf):
    user = UserFactory()
    statuses = [_login(client, csrf, user.email, f"wrong-{i}").status_code for i in range(6)]
    assert statuses == [401] * 5 + [429]
    response = _login(client, csrf, user.email, "wrong-again")
    assert response.status_code == 429
    assert b"Too many" in response.data and b"Traceback" not in response.data
    assert "Retry-After" in response.headers


def test_account_ceiling_holds_across_addresses_that_have_failed(app, client, csrf, password, monkeypatch):
    monkeypatch.setitem(app.config, "LOGIN_ACCOUNT_RATE_LIMIT", "5 per hour")
    user = UserFactory()
    for i in range(5):
        _login(client, csrf, user.email, "wrong", environ_base={"REMOTE_ADDR": f"10.0.0.{i}"})
    response = _login(client, csrf, user.email, "wrong", environ_base={"REMOTE_ADDR": "10.0.0.1"})
    assert response.status_code == 429
    fresh = _login(client, csrf, user.email, password, environ_base={"REMOTE_ADDR": "10.0.0.99"})
    assert fresh.status_code == 302  # an address that has not failed is let past the ceiling


def test_five_failures_from_one_address_do_not_lock_the_account_elsewhere(client, csrf, password):
    user = UserFactory()
    for _ in range(6):
        _login(client, csrf, user.email, "wrong", environ_base={"REMOTE_ADDR": "10.0.0.1"})
    assert _login(client, csrf, user.email, password, environ_base={"REMOTE_ADDR": "10.0.0.2"}).status_code == 302


def test_successful_logins_do_not_use_up_the_limit(client, csrf, password):
    user = UserFactory()
    for _ in range(7):
        assert _login(client, csrf, user.email, password).status_code == 302


def test_post_without_csrf_token_is_400(client, password):
    user = UserFactory()
    response = client.post("/login", data={"email": user.email, "password": password})
    assert response.status_code == 400
    assert b"Reload the page" in response.data


def test_logout_requires_post_with_csrf(client, csrf, login_as):
    login_as(UserFactory())
    assert client.get("/logout").status_code == 405
    assert client.post("/logout").status_code == 400
    response = client.post("/logout", headers=csrf())
    assert response.status_code == 302
    assert client.get("/inbox").status_code == 302


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "javascript:alert(1)", "/\\evil"])
def test_next_never_leaves_the_site(client, csrf, password, target):
    user = UserFactory()
    response = client.post(
        "/login", query_string={"next": target}, data={"email": user.email, "password": password}, headers=csrf()
    )
    assert response.headers["Location"] == "/inbox"


def test_next_keeps_a_relative_path(client, csrf, password):
    user = UserFactory()
    response = client.post(
        "/login",
        query_string={"next": "/inbox?filter=unread"},
        data={"email": user.email, "password": password},
        headers=csrf(),
    )
    assert response.headers["Location"] == "/inbox?filter=unread"


def test_session_cookie_flags(client, csrf, password):
    user = UserFactory()
    response = _login(client, csrf, user.email, password)
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie


def test_operator_required_guard(app):
    from flask_login import login_user
    from werkzeug.exceptions import Forbidden

    page = operator_required(lambda: "ok")
    with app.test_request_context("/guarded"):
        assert page().status_code == 302  # anonymous: sent to the sign-in page
    for role, allowed in (("member", False), ("operator", True), ("admin", True)):
        user = UserFactory(role=role)
        with app.test_request_context("/guarded"):
            login_user(user)
            if allowed:
                assert page() == "ok"
            else:
                with pytest.raises(Forbidden):
                    page()
