"""Console sign-in with OpenID Connect against a real provider (node-oidc-provider, started once for this module).

Hato runs in the test client; every exchange with the provider (discovery, JWKS, token, the login page) is real HTTP.
"""

import base64
import json
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import sqlalchemy as sa
from flask import g

from app.auth import sso
from app.config import Config, check
from app.extensions import db
from app.models import OidcAccount, User
from tests.factories import UserFactory
from tests.support.oidc_provider import CLIENT_ID, OidcProvider, sign_in_at_provider


@pytest.fixture(scope="module")
def provider(app, tmp_path_factory):
    started = OidcProvider([app.config["BASE_URL"]], tmp_path_factory.mktemp("oidc") / "provider.log")
    yield started
    started.stop()


@pytest.fixture
def oidc_on(app, provider, monkeypatch):
    for key, value in provider.settings().items():
        monkeypatch.setitem(app.config, key, value)
    return provider


def _local(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _to_provider(client, next_path: str | None = None) -> str:
    response = client.get("/login/oidc", query_string={"next": next_path} if next_path else None)
    assert response.status_code == 302, response.data[:300]
    return response.headers["Location"]


def _sign_in(client, login: str, next_path: str | None = None):
    """The whole round trip; return Hato's answer to the provider's redirect back."""
    return client.get(_local(sign_in_at_provider(_to_provider(client, next_path), login)))


def _signed_in_user_id(client):
    with client.session_transaction() as sess:
        return sess.get("_user_id")


def _kid(id_token: str) -> str:
    header = id_token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"]


def test_the_redirect_asks_for_code_with_pkce_s256_state_and_nonce(client, oidc_on):
    query = parse_qs(urlsplit(_to_provider(client)).query)
    assert query["response_type"] == ["code"] and query["client_id"] == [CLIENT_ID]
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) >= 43
    assert query["state"][0] and query["nonce"][0]
    assert query["redirect_uri"] == ["http://127.0.0.1:5000/login/oidc/callback"]


def test_only_the_newest_pending_sign_in_is_kept_in_the_cookie(client, oidc_on):
    for _ in range(3):
        _to_provider(client)
    with client.session_transaction() as sess:
        assert len([key for key in sess if key.startswith("_state_oidc_")]) == 1


def test_first_sign_in_creates_the_account_with_the_providers_role(client, oidc_on):
    oidc_on.set_account("alice", "alice@corp.example", "Alice Ops", groups=("staff", "hato-operators"))
    response = _sign_in(client, "alice")
    assert response.status_code == 302 and response.headers["Location"] == "/console/"
    user = db.session.scalars(sa.select(User).where(User.email == "alice@corp.example")).one()
    assert (user.role, user.display_name, user.password_hash) == ("operator", "Alice Ops", None)
    link = db.session.get(OidcAccount, (oidc_on.issuer, "alice"))
    assert link.user_id == user.id
    assert _signed_in_user_id(client) == str(user.id)
    assert client.get("/console/").status_code == 200

    again = _sign_in(client, "alice")  # the second time finds the link: no second account
    assert again.status_code == 302
    assert (
        db.session.scalar(sa.select(sa.func.count()).select_from(User).where(User.email == "alice@corp.example")) == 1
    )


def test_a_group_removed_at_the_provider_removes_the_role_at_next_sign_in(app, client, oidc_on):
    oidc_on.set_account("bob", "bob@corp.example", groups=("hato-admins",))
    assert _sign_in(client, "bob").status_code == 302
    assert db.session.scalars(sa.select(User.role).where(User.email == "bob@corp.example")).one() == "admin"

    oidc_on.set_account("bob", "bob@corp.example", groups=("staff",))
    other_browser = app.test_client()
    assert _sign_in(other_browser, "bob").headers["Location"] == "/inbox"
    db.session.expire_all()
    assert db.session.scalars(sa.select(User.role).where(User.email == "bob@corp.example")).one() == "member"
    assert other_browser.get("/console/").status_code == 403  # a member now
    g.pop("_login_user", None)  # the test's app context outlives requests: forget the last request's user
    assert client.get("/console/").status_code == 302  # the admin's older session ended with the role


def test_a_wrong_state_is_refused(client, oidc_on, caplog):
    oidc_on.set_account("carol", "carol@corp.example", groups=("hato-operators",))
    back = urlsplit(sign_in_at_provider(_to_provider(client), "carol"))
    query = {k: v[0] for k, v in parse_qs(back.query).items()}
    forged = client.get(back.path, query_string={**query, "state": "forged-state"})
    assert forged.status_code == 401
    assert b"did not work" in forged.data
    assert "MismatchingStateError" in caplog.text
    assert _signed_in_user_id(client) is None
    stranger = client.application.test_client()  # a browser that never started this sign-in (login CSRF)
    assert stranger.get(back.path, query_string=query).status_code == 401
    assert not db.session.scalar(
        sa.select(sa.func.count()).select_from(OidcAccount).where(OidcAccount.subject == "carol")
    )


def test_a_replayed_code_is_refused(client, oidc_on, caplog):
    oidc_on.set_account("dave", "dave@corp.example")
    back = _local(sign_in_at_provider(_to_provider(client), "dave"))
    pending = client.get_cookie("session").value  # the cookie still holding the pending state
    assert client.get(back).status_code == 302
    attacker = client.application.test_client()
    attacker.set_cookie("session", pending)
    replay = attacker.get(back)
    assert replay.status_code == 401  # the provider refuses a used code
    assert "invalid_grant" in caplog.text
    assert _signed_in_user_id(attacker) is None


def test_an_id_token_for_another_audience_is_refused(client, oidc_on, caplog):
    oidc_on.set_account("erin", "erin@corp.example", groups=("hato-admins",))
    oidc_on.id_token_audience("another-app")
    try:
        response = _sign_in(client, "erin")
    finally:
        oidc_on.id_token_audience(None)
    assert response.status_code == 401
    assert _signed_in_user_id(client) is None
    assert db.session.scalar(sa.select(User).where(User.email == "erin@corp.example")) is None
    assert "InvalidClaimError" in caplog.text and "'aud'" in caplog.text


def test_an_expired_id_token_is_refused(client, oidc_on, caplog):
    oidc_on.set_account("frank", "frank@corp.example")
    oidc_on.expire_id_tokens(True)
    try:
        response = _sign_in(client, "frank")
    finally:
        oidc_on.expire_id_tokens(False)
    assert response.status_code == 401
    assert _signed_in_user_id(client) is None
    assert "ExpiredTokenError" in caplog.text


def test_a_rotated_signing_key_is_fetched_and_accepted(app, client, oidc_on):
    oidc_on.set_account("grace", "grace@corp.example", groups=("hato-operators",))
    assert _sign_in(client, "grace").status_code == 302  # the JWKS with the first key is now kept
    new_kid = oidc_on.rotate_key()
    browser = app.test_client()
    assert _sign_in(browser, "grace").status_code == 302
    with browser.session_transaction() as sess:
        assert _kid(sess["oidc_id_token"]) == new_kid


def test_the_return_path_must_stay_on_this_site(client, oidc_on):
    oidc_on.set_account("heidi", "heidi@corp.example", groups=("hato-operators",))
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        response = _sign_in(client, "heidi", next_path=target)
        assert response.headers["Location"] == "/console/", target
    assert _sign_in(client, "heidi", next_path="/console/types").headers["Location"] == "/console/types"


def test_sign_out_ends_the_providers_session_too(client, csrf, oidc_on):
    oidc_on.set_account("ivan", "ivan@corp.example", groups=("hato-operators",))
    _sign_in(client, "ivan")
    with client.session_transaction() as sess:
        id_token = sess["oidc_id_token"]
    response = client.post("/logout", headers=csrf())
    assert response.status_code == 302
    end = urlsplit(response.headers["Location"])
    assert f"{end.scheme}://{end.netloc}{end.path}" == f"{oidc_on.issuer}/session/end"
    query = parse_qs(end.query)
    assert query["id_token_hint"] == [id_token] and query["client_id"] == [CLIENT_ID]
    assert query["post_logout_redirect_uri"] == ["http://127.0.0.1:5000/login"]
    assert _signed_in_user_id(client) is None
    page = httpx.get(response.headers["Location"], timeout=10)  # the provider accepts it: its sign-out question
    assert page.status_code == 200 and "logout" in page.text.lower()


def test_sign_out_needs_the_csrf_token(client, oidc_on):
    oidc_on.set_account("judy", "judy@corp.example")
    _sign_in(client, "judy")
    assert client.post("/logout").status_code == 400
    assert _signed_in_user_id(client) is not None


def test_the_sign_in_page_offers_the_provider_when_configured(app, client, monkeypatch):
    assert b"Sign in with" not in client.get("/login").data
    monkeypatch.setitem(app.config, "OIDC_ISSUER", "https://idp.example")
    monkeypatch.setitem(app.config, "OIDC_DISPLAY_NAME", "Okta")
    page = client.get("/login?next=/console/").data.decode()
    assert "Sign in with Okta" in page and 'href="/login/oidc?next=/console/"' in page


def test_only_staff_refuses_a_staff_password_but_not_a_members(app, client, csrf, password, monkeypatch, oidc_on):
    monkeypatch.setitem(app.config, "OIDC_ONLY_STAFF", True)
    operator, member = UserFactory(role="operator"), UserFactory()
    refused = client.post("/login", data={"email": operator.email, "password": password}, headers=csrf())
    assert refused.status_code == 403
    assert b"Staff accounts sign in with Test IdP" in refused.data
    assert _signed_in_user_id(client) is None
    wrong = client.post("/login", data={"email": operator.email, "password": "wrong"}, headers=csrf())
    assert wrong.status_code == 401  # a wrong password learns nothing more
    accepted = client.post("/login", data={"email": member.email, "password": password}, headers=csrf())
    assert accepted.status_code == 302 and _signed_in_user_id(client) == str(member.id)


def test_an_unverified_email_of_an_existing_account_is_not_taken_over(app):
    existing = UserFactory(email="owner@corp.example", role="admin")
    claims = {"sub": "mallory", "email": "Owner@corp.example", "email_verified": False}
    with pytest.raises(sso.AccountRefused):
        sso.account_for("https://idp.example", claims, "member")
    user, created = sso.account_for("https://idp.example", {**claims, "email_verified": True}, "operator")
    assert (user.id, created, user.role) == (existing.id, True, "operator")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"OIDC_ONLY_STAFF": "1"}, "OIDC_ONLY_STAFF is on but OIDC_ISSUER is empty"),
        ({"OIDC_ISSUER": "http://idp.example"}, "OIDC_ISSUER='http://idp.example' is not an https:// URL"),
        ({"OIDC_ISSUER": "https://idp.example"}, "OIDC_CLIENT_ID or OIDC_CLIENT_SECRET is not"),
        ({"OIDC_ISSUER": "https://idp.example", "OIDC_CLIENT_ID": "a", "OIDC_CLIENT_SECRET": "b",
          "OIDC_SCOPES": "email"}, "must include openid"),
    ],
)  # fmt: skip
def test_settings_that_cannot_work_are_refused(env, expected):
    problems = check(vars(Config({"SECRET_KEY": "x" * 48, **env})))
    assert any(expected in p for p in problems), problems


def test_the_pages_let_the_sign_out_form_go_to_the_issuer_only_when_configured(client, app, monkeypatch):
    assert "form-action 'self';" in client.get("/login").headers["Content-Security-Policy"]
    monkeypatch.setitem(app.config, "OIDC_ISSUER", "https://idp.example/realms/staff")
    policy = client.get("/login").headers["Content-Security-Policy"]
    assert "form-action 'self' https://idp.example;" in policy


def test_without_settings_the_oidc_routes_lead_back_to_the_sign_in_page(client):
    assert client.get("/login/oidc").headers["Location"] == "/login"
    assert client.get("/login/oidc/callback?code=x&state=y").headers["Location"] == "/login"


def test_an_error_from_the_provider_is_a_refusal(client, oidc_on, caplog):
    _to_provider(client)
    response = client.get("/login/oidc/callback?error=access_denied&error_description=cancelled")
    assert response.status_code == 401 and "access_denied" in caplog.text
    assert _signed_in_user_id(client) is None
