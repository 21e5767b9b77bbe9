"""Attack: lock people out through the sign-in and unsubscribe limits, or dodge the limits with a forged address.

Behind a reverse proxy every request comes from the proxy's address. The attacker fails five sign-ins for
the admin and, if the limits key on that address or on the account alone, locks out everybody, or the
admin wherever they are. The tests play the proxy (REMOTE_ADDR 10.0.0.2, appending the address it saw to
X-Forwarded-For) with TRUSTED_PROXY_HOPS=1, as create_app configures it.
"""

from __future__ import annotations

import pytest
from werkzeug.middleware.proxy_fix import ProxyFix

from app import create_app
from app.delivery.unsubscribe import make_token
from app.extensions import limiter
from tests.conftest import TEST_CONFIG, csrf_token_for
from tests.factories import UserFactory

PROXY = "10.0.0.2"
ATTACKER = "203.0.113.66"
ADMIN_AT_HOME = "198.51.100.7"


@pytest.fixture
def behind_one_proxy(app, monkeypatch):
    """The app under test wrapped exactly as create_app wraps it with TRUSTED_PROXY_HOPS=1 (if it does)."""
    proxied = create_app(dict(TEST_CONFIG, TRUSTED_PROXY_HOPS=1)).wsgi_app
    limiter._storage, limiter._limiter = app.limiter_state  # the second app re-pointed the shared limiter
    if isinstance(proxied, ProxyFix):
        monkeypatch.setattr(app, "wsgi_app", ProxyFix(app.wsgi_app, x_for=proxied.x_for, x_proto=proxied.x_proto))


@pytest.fixture
def admin():
    return UserFactory(role="admin", email="admin@example.com")


def _via_proxy(client, csrf, email, password, client_address, forwarded_for=None):
    """POST /login as the proxy forwards it: X-Forwarded-For gets the address the proxy saw appended."""
    chain = f"{forwarded_for}, {client_address}" if forwarded_for else client_address
    return client.post(
        "/login",
        data={"email": email, "password": password},
        # over https (the proxy says so), where Flask-WTF also wants the browser's same-site Referer
        headers={
            **csrf(),
            "X-Forwarded-For": chain,
            "X-Forwarded-Proto": "https",
            "Referer": "https://localhost/login",
        },
        environ_base={"REMOTE_ADDR": PROXY},
    )


def _csrf_for(app, client):
    return lambda: {"X-CSRFToken": csrf_token_for(app, client)}


def _signed_in_as(client, user) -> bool:
    with client.session_transaction() as sess:
        return sess.get("_user_id") == str(user.id)


def test_trusted_proxy_hops_puts_proxyfix_in_front_only_when_set(app):
    hops = create_app(dict(TEST_CONFIG, TRUSTED_PROXY_HOPS=2)).wsgi_app
    plain = create_app(dict(TEST_CONFIG)).wsgi_app
    limiter._storage, limiter._limiter = app.limiter_state
    assert isinstance(hops, ProxyFix) and (hops.x_for, hops.x_proto, hops.x_host) == (2, 2, 0)
    assert not isinstance(plain, ProxyFix)
    assert app.config["TRUSTED_PROXY_HOPS"] == 0  # the default trusts no header


def test_five_failures_for_the_admin_do_not_lock_the_admin_out_elsewhere(
    app, client, csrf, password, admin, behind_one_proxy
):
    attacker = [_via_proxy(client, csrf, admin.email, f"guess-{i}", ATTACKER).status_code for i in range(7)]
    assert attacker == [401] * 5 + [429, 429]

    owner = app.test_client()
    response = _via_proxy(owner, _csrf_for(app, owner), admin.email, password, ADMIN_AT_HOME)
    assert response.status_code == 302 and _signed_in_as(owner, admin)


def test_one_attacker_does_not_lock_out_everybody_behind_the_proxy(
    app, client, csrf, password, admin, behind_one_proxy
):
    member = UserFactory()
    for i in range(5):
        _via_proxy(client, csrf, admin.email, f"guess-{i}", ATTACKER)
        _via_proxy(client, csrf, member.email, f"guess-{i}", ATTACKER)
    other = app.test_client()
    other_csrf = _csrf_for(app, other)
    assert _via_proxy(other, other_csrf, member.email, "typo", "192.0.2.10").status_code == 401
    assert _via_proxy(other, other_csrf, member.email, password, "192.0.2.10").status_code == 302


def test_a_forged_forwarded_for_in_front_of_the_proxy_does_not_make_a_new_client(client, csrf, admin, behind_one_proxy):
    """The attacker writes X-Forwarded-For himself; the proxy appends the real address, and only that is trusted."""
    statuses = [
        _via_proxy(client, csrf, admin.email, f"guess-{i}", ATTACKER, forwarded_for=f"192.0.2.{i}").status_code
        for i in range(6)
    ]
    assert statuses == [401] * 5 + [429]


def test_a_forged_forwarded_for_without_a_trusted_proxy_is_ignored(client, csrf, admin):
    """TRUSTED_PROXY_HOPS=0 (the default): X-Forwarded-For is the attacker's own text and changes nothing."""
    statuses = [
        client.post(
            "/login",
            data={"email": admin.email, "password": f"guess-{i}"},
            headers={**csrf(), "X-Forwarded-For": f"192.0.2.{i}", "X-Real-IP": f"192.0.2.{i}"},
            environ_base={"REMOTE_ADDR": ATTACKER},
        ).status_code
        for i in range(6)
    ]
    assert statuses == [401] * 5 + [429]


def test_the_per_account_ceiling_stops_a_spread_out_guesser_but_not_the_owner(
    app, client, csrf, password, admin, behind_one_proxy, monkeypatch
):
    monkeypatch.setitem(app.config, "LOGIN_ACCOUNT_RATE_LIMIT", "10 per hour")  # default 50 per hour
    botnet = [f"203.0.113.{i}" for i in range(1, 11)]
    assert [_via_proxy(client, csrf, admin.email, "guess", ip).status_code for ip in botnet] == [401] * 10

    # Every address has failed once (four tries left of its own): the account's ceiling now holds them all.
    held = [_via_proxy(client, csrf, admin.email, "guess", ip) for ip in botnet[:3]]
    assert [r.status_code for r in held] == [429] * 3
    assert b"Too many" in held[0].data and 60 < int(held[0].headers["Retry-After"]) <= 3600
    # A fresh address gets one try; a wrong password marks it and the ceiling holds it too.
    assert _via_proxy(client, csrf, admin.email, "guess", "203.0.113.200").status_code == 401
    assert _via_proxy(client, csrf, admin.email, "guess", "203.0.113.200").status_code == 429
    # The owner, from an address that has not failed, signs in with the right password.
    owner = app.test_client()
    response = _via_proxy(owner, _csrf_for(app, owner), admin.email, password, ADMIN_AT_HOME)
    assert response.status_code == 302 and _signed_in_as(owner, admin)
    # Another account's ceiling is its own.
    member = UserFactory()
    assert _via_proxy(client, csrf, member.email, password, botnet[0]).status_code == 302


def test_one_address_spraying_many_accounts_is_stopped(client, csrf, app):
    """LOGIN_CLIENT_RATE_LIMIT (default 25 per 5 minutes) across accounts, from one client address."""
    limit = int(app.config["LOGIN_CLIENT_RATE_LIMIT"].split()[0])
    statuses = [
        client.post(
            "/login",
            data={"email": f"user{i}@example.com", "password": "Summer2025!"},
            headers=csrf(),
            environ_base={"REMOTE_ADDR": ATTACKER},
        ).status_code
        for i in range(limit + 1)
    ]
    assert statuses == [401] * limit + [429]


def test_a_right_password_from_the_attackers_own_address_is_still_limited(client, csrf, password, admin):
    """The limit is on the address that failed: it does not let a correct guess through once it is reached."""
    for i in range(5):
        client.post("/login", data={"email": admin.email, "password": f"g{i}"}, headers=csrf())
    assert client.post("/login", data={"email": admin.email, "password": password}, headers=csrf()).status_code == 429


# --- one-click unsubscribe ---------------------------------------------------------------------------

MAIL_PROVIDER = "209.85.220.41"  # one address posting many people's one-click unsubscribes


def test_many_valid_unsubscribes_from_one_mail_provider_are_not_limited(app, email_type):
    mail = app.test_client(use_cookies=False)
    users = [UserFactory() for _ in range(35)]
    statuses = [
        mail.post(
            f"/unsubscribe/{make_token(user.id, email_type.type)}",
            data={"List-Unsubscribe": "One-Click"},
            environ_base={"REMOTE_ADDR": MAIL_PROVIDER},
        ).status_code
        for user in users
    ]
    assert statuses == [200] * 35


def test_guessing_unsubscribe_tokens_is_limited_per_address_and_not_elsewhere(app, email_type):
    guesser = app.test_client(use_cookies=False)
    guesses = [
        guesser.post(f"/unsubscribe/forged-{i}", environ_base={"REMOTE_ADDR": ATTACKER}).status_code for i in range(31)
    ]
    assert guesses == [404] * 30 + [429]
    assert guesser.get("/unsubscribe/forged-x", environ_base={"REMOTE_ADDR": ATTACKER}).status_code == 429

    user = UserFactory()
    mail = app.test_client(use_cookies=False)
    response = mail.post(
        f"/unsubscribe/{make_token(user.id, email_type.type)}",
        data={"List-Unsubscribe": "One-Click"},
        environ_base={"REMOTE_ADDR": MAIL_PROVIDER},
    )
    assert response.status_code == 200


def test_guessing_through_the_confirmation_page_counts_too(app):
    guesser = app.test_client(use_cookies=False)
    statuses = [
        guesser.get(f"/unsubscribe/forged-{i}", environ_base={"REMOTE_ADDR": ATTACKER}).status_code for i in range(31)
    ]
    assert statuses == [404] * 30 + [429]
