"""Issue 14 item 15, the attack: a session cookie copied off a victim's browser keeps working forever.

The attacker replays a copied cookie after the victim clicked "sign out everywhere", after the
victim's password was changed, and after the victim's role was taken away; replays a cookie whose
sign-in is older than the absolute lifetime; replays an old-style cookie with no server-side stamp
and a hand-made remember cookie; and tries to sign the victim out everywhere without a CSRF token.
"""

from __future__ import annotations

import time

import pytest
from flask import g
from flask_login.utils import encode_cookie

from app.extensions import db
from app.models import User
from tests.conftest import SettledClient, csrf_token_for
from tests.factories import UserFactory
from tests.realtime.helpers import session_cookie


class Browser(SettledClient):
    """A test client whose every request starts as on a server: no user remembered, rows read afresh.

    The tests share one app context (and so flask.g and the session's identity map) across requests;
    without this, one client's signed-in user would leak into the next client's request.
    """

    def open(self, *args, **kwargs):
        g.pop("_login_user", None)
        db.session.expire_all()
        return super().open(*args, **kwargs)


@pytest.fixture
def client(app):
    """The victim's browser."""
    return Browser(app, app.response_class, use_cookies=True)


def new_browser(app) -> Browser:
    return Browser(app, app.response_class, use_cookies=True)


def sign_in(app, client, user, password) -> str:
    """Sign client in through the form; return the session cookie the victim's browser now holds."""
    token = csrf_token_for(app, client)
    response = client.post("/login", data={"email": user.email, "password": password}, headers={"X-CSRFToken": token})
    assert response.status_code == 302, response.status_code
    return client.get_cookie("session").value


def copy_of(app, cookie: str):
    """The attacker's client, holding a copy of the victim's cookie."""
    thief = new_browser(app)
    thief.set_cookie("session", cookie)
    return thief


def signed_in(client) -> bool:
    response = client.get("/inbox")
    assert response.status_code in (200, 302), response.status_code
    return response.status_code == 200


def test_copied_cookie_is_refused_after_sign_out_everywhere_and_the_clicking_browser_stays(
    app, client, password, redis_client
):
    victim = UserFactory()
    thief = copy_of(app, sign_in(app, client, victim, password))
    other_device = new_browser(app)
    sign_in(app, other_device, victim, password)
    assert signed_in(thief) and signed_in(other_device)

    page = client.get("/account/sign-ins")
    assert page.status_code == 200 and b"Sign out everywhere else" in page.data
    response = client.post("/logout/everywhere", headers={"X-CSRFToken": csrf_token_for(app, client)})
    assert response.status_code == 302

    assert signed_in(client)  # the browser that clicked
    assert not signed_in(thief)
    assert not signed_in(other_device)
    assert thief.get("/account/sign-ins").status_code == 302
    assert victim.session_version == 1


def test_copied_cookie_is_refused_after_a_password_change(app, client, password):
    victim = UserFactory()
    thief = copy_of(app, sign_in(app, client, victim, password))
    assert signed_in(thief)

    result = app.test_cli_runner().invoke(args=["users", "create", victim.email, "--password", "a-new-password-1"])
    assert result.exit_code == 0, result.output

    assert not signed_in(thief)
    assert not signed_in(client)  # the victim signs in again, with the new password
    sign_in(app, client, victim, "a-new-password-1")
    assert signed_in(client)


@pytest.mark.parametrize("how", ["console", "cli"])
def test_copied_operator_cookie_is_refused_after_the_role_is_taken_away(app, client, login_as, csrf, password, how):
    victim = UserFactory(role="operator")
    thief = copy_of(app, sign_in(app, new_browser(app), victim, password))
    assert thief.get("/console/").status_code == 200

    if how == "console":
        login_as(UserFactory(role="admin"))
        response = client.post(f"/console/users/{victim.id}/role", data={"role": "member"}, headers=csrf())
        assert response.status_code == 302
    else:
        result = app.test_cli_runner().invoke(
            args=["users", "create", victim.email, "--password", password, "--role", "member"]
        )
        assert result.exit_code == 0, result.output
    assert victim.role == "member"

    assert thief.get("/console/").status_code == 302  # signed out, not just demoted
    assert not signed_in(thief)


def test_a_role_change_to_the_same_role_ends_nothing(app, client, login_as, csrf, password):
    member = UserFactory()
    browser = new_browser(app)
    sign_in(app, browser, member, password)
    login_as(UserFactory(role="admin"))
    client.post(f"/console/users/{member.id}/role", data={"role": "member"}, headers=csrf())
    assert signed_in(browser)


@pytest.mark.parametrize(
    ("hours_ago", "accepted"),
    [(0, True), (719.9, True), (720.1, False), (24 * 365, False), (-1, False)],
)
def test_absolute_lifetime(app, hours_ago, accepted):
    """A cookie signed in longer ago than SESSION_MAX_AGE_HOURS (720) is refused, however active."""
    user = UserFactory()
    cookie = session_cookie(app, user.id, signed_in_at=int(time.time() - hours_ago * 3600))
    assert signed_in(copy_of(app, cookie)) is accepted


def test_absolute_lifetime_follows_the_setting(app, monkeypatch):
    user = UserFactory()
    monkeypatch.setitem(app.config, "SESSION_MAX_AGE_HOURS", 1)
    two_hours_old = session_cookie(app, user.id, signed_in_at=int(time.time() - 7200))
    fresh = session_cookie(app, user.id)
    assert not signed_in(copy_of(app, two_hours_old))
    assert signed_in(copy_of(app, fresh))


def test_cookie_stamped_with_another_version_or_user_is_refused(app):
    user, other = UserFactory(), UserFactory()
    assert signed_in(copy_of(app, session_cookie(app, user.id)))
    assert not signed_in(copy_of(app, session_cookie(app, user.id, version=1)))
    # A stamp minted for another account does not sign anyone in as this one.
    assert not signed_in(copy_of(app, session_cookie(app, user.id, uid=other.id)))
    assert not signed_in(copy_of(app, session_cookie(app, user.id, ver="0")))


def test_unstamped_and_remember_cookies_are_refused(app):
    """A cookie from before server-side sessions (no stamp) and a remember-me cookie sign no one in."""
    user = UserFactory()
    old_style = app.session_interface.get_signing_serializer(app).dumps({"_user_id": str(user.id), "_fresh": True})
    assert not signed_in(copy_of(app, old_style))
    with app.test_request_context():
        remember = encode_cookie(str(user.id))
    thief = new_browser(app)
    thief.set_cookie("remember_token", remember)
    assert not signed_in(thief)


def test_sign_out_everywhere_needs_csrf_and_a_post(app, client, password):
    victim = UserFactory()
    thief = copy_of(app, sign_in(app, client, victim, password))
    assert client.get("/logout/everywhere").status_code == 405
    assert client.post("/logout/everywhere").status_code == 400
    assert client.post("/logout/everywhere", headers={"X-CSRFToken": "forged"}).status_code == 400
    # A cross-site form post carries the cookie but not a token for this session.
    other = new_browser(app)
    foreign_token = csrf_token_for(app, other)
    assert client.post("/logout/everywhere", data={"csrf_token": foreign_token}).status_code == 400
    assert signed_in(thief) and signed_in(client)
    assert db.session.get(User, victim.id).session_version == 0


def test_sign_out_everywhere_needs_a_signed_in_session(app, client):
    response = client.post("/logout/everywhere", headers={"X-CSRFToken": csrf_token_for(app, client)})
    assert response.status_code == 302 and "/login" in response.headers["Location"]


def test_a_fresh_sign_in_after_sign_out_everywhere_works(app, client, password):
    victim = UserFactory()
    sign_in(app, client, victim, password)
    client.post("/logout/everywhere", headers={"X-CSRFToken": csrf_token_for(app, client)})
    laptop = new_browser(app)
    sign_in(app, laptop, victim, password)
    assert signed_in(laptop) and signed_in(client)
