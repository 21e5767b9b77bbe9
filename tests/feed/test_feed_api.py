"""Issue 19: user tokens (POST /v1/user-tokens, self-signed), the headless feed /v1/feed, its CORS and scopes."""

from __future__ import annotations

import base64
import time

import jwt
import pytest
import sqlalchemy as sa

from app.api_keys import service as keys
from app.extensions import db
from tests.api.conftest import Api
from tests.factories import NotificationFactory, NotificationTypeFactory, UserFactory

HOST = "http://127.0.0.1:5001"


def _key(client, *scopes: str) -> Api:
    """An Api client whose key has exactly these scopes."""
    key = keys.create_api_key(None, "feed")
    db.session.execute(
        sa.text("UPDATE api_keys SET scopes = CAST(:s AS text[]) WHERE prefix = :p"),
        {"s": list(scopes), "p": keys.key_prefix(key)},
    )
    return Api(client, key)


@pytest.fixture
def allowed_origin(app, monkeypatch):
    """The demo host page's origin may call the feed."""
    monkeypatch.setitem(app.config, "FEED_ALLOWED_ORIGINS", [HOST])
    return HOST


@pytest.fixture
def issuer(client):
    return _key(client, "feed:issue")


@pytest.fixture
def member():
    return UserFactory(external_id="bell-user")


def _token(issuer: Api, user: str = "bell-user", ttl: int = 3600) -> str:
    response = issuer.post("/v1/user-tokens", {"user": user, "ttl": ttl})
    assert response.status_code == 201, response.get_json()
    return response.get_json()["token"]


def _feed(client, token: str | None, method: str = "GET", path: str = "", **kwargs):
    headers = kwargs.pop("headers", {})
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return client.open("/v1/feed" + path, method=method, headers=headers, **kwargs)


def _secret(issuer: Api) -> tuple[str, bytes, str]:
    body = issuer.get("/v1/user-tokens/signing-secret").get_json()
    secret = base64.urlsafe_b64decode(body["secret"] + "=" * (-len(body["secret"]) % 4))
    return body["kid"], secret, body["audience"]


def _assert_401(response, code: str):
    assert response.status_code == 401
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["code"] == code and body["status"] == 401
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]


# --- issuing -------------------------------------------------------------------------------------------


def test_a_minted_token_is_an_hs256_jwt_for_this_hato_and_that_member(app, issuer, member):
    response = issuer.post("/v1/user-tokens", {"user": "bell-user", "ttl": 600})
    assert response.status_code == 201
    token = response.get_json()["token"]
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "HS256" and header["kid"] == keys.key_prefix(issuer.key)
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["sub"] == "bell-user"
    assert claims["aud"] == app.config["BASE_URL"].rstrip("/")
    assert 590 <= claims["exp"] - time.time() <= 610


def test_issuing_needs_the_feed_issue_scope(client, member):
    sender = _key(client, "notifications:write", "notifications:read", "users:write", "links:create")
    response = sender.post("/v1/user-tokens", {"user": "bell-user"})
    assert response.status_code == 403
    assert response.get_json()["scope"] == "feed:issue"


def test_issuing_for_an_unknown_user_or_an_operator_is_404(issuer):
    UserFactory(external_id="op-1", role="operator")
    assert issuer.post("/v1/user-tokens", {"user": "nobody"}).status_code == 404
    assert issuer.post("/v1/user-tokens", {"user": "op-1"}).status_code == 404


def test_a_ttl_beyond_the_maximum_is_refused(app, issuer, member, monkeypatch):
    monkeypatch.setitem(app.config, "USER_TOKEN_MAX_TTL", 600)
    assert issuer.post("/v1/user-tokens", {"user": "bell-user", "ttl": 601}).status_code == 422
    assert issuer.post("/v1/user-tokens", {"user": "bell-user", "ttl": 30}).status_code == 422


def test_a_self_signed_token_from_the_signing_secret_works(client, issuer, member):
    kid, secret, audience = _secret(issuer)
    claims = {"sub": "bell-user", "aud": audience, "exp": int(time.time()) + 60}
    token = jwt.encode(claims, secret, algorithm="HS256", headers={"kid": kid})
    assert _feed(client, token, path="/counts").status_code == 200


# --- refusals: 401 problem+json ------------------------------------------------------------------------


def test_no_token_or_an_api_key_is_refused(client, issuer, member):
    _assert_401(_feed(client, None), "malformed")
    _assert_401(_feed(client, issuer.key), "malformed")  # an API key is not a user token


def test_an_expired_token_says_fetch_a_new_one(client, issuer, member):
    kid, secret, audience = _secret(issuer)
    token = jwt.encode(
        {"sub": "bell-user", "aud": audience, "exp": int(time.time()) - 60}, secret, headers={"kid": kid}
    )
    _assert_401(_feed(client, token), "expired")


def test_a_token_for_another_hato_is_refused(client, issuer, member):
    kid, secret, _ = _secret(issuer)
    token = jwt.encode({"sub": "bell-user", "aud": "https://other.example", "exp": int(time.time()) + 60}, secret,
                       headers={"kid": kid})  # fmt: skip
    _assert_401(_feed(client, token), "audience")


def test_a_forged_signature_an_unknown_kid_and_alg_none_are_refused(client, issuer, member):
    kid, _, audience = _secret(issuer)
    claims = {"sub": "bell-user", "aud": audience, "exp": int(time.time()) + 60}
    _assert_401(_feed(client, jwt.encode(claims, b"x" * 32, headers={"kid": kid})), "signature")
    _assert_401(_feed(client, jwt.encode(claims, b"x" * 32, headers={"kid": "hato_nope"})), "signature")
    unsigned = jwt.encode(claims, None, algorithm="none", headers={"kid": kid})
    _assert_401(_feed(client, unsigned), "malformed")
    good = _token(issuer)
    tampered = good.rsplit(".", 1)[0] + ".AAAA"
    _assert_401(_feed(client, tampered), "signature")


def test_revoking_the_key_or_its_scope_invalidates_its_tokens(client, issuer, member):
    token = _token(issuer)
    assert _feed(client, token, path="/counts").status_code == 200
    keys.revoke_api_key(None, keys.key_prefix(issuer.key))
    _assert_401(_feed(client, token, path="/counts"), "signature")


def test_a_token_of_a_member_erased_since_is_refused(client, issuer, member):
    token = _token(issuer)
    db.session.execute(sa.text("UPDATE users SET external_id = 'renamed' WHERE id = :id"), {"id": member.id})
    _assert_401(_feed(client, token), "unknown_user")


def test_a_user_token_opens_no_api_key_endpoint(client, issuer, member):
    token = _token(issuer)
    response = client.get("/v1/users/bell-user/counts", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401


# --- the feed: same rows and guarantees as the inbox ----------------------------------------------------


def test_the_page_lists_only_the_members_rows_with_counts_and_a_keyset_cursor(client, issuer, member):
    other = UserFactory()
    mine = NotificationFactory.create_batch(3, user_id=member.id)
    NotificationFactory(user_id=other.id, title="someone else's")
    body = _feed(client, _token(issuer), query_string={"limit": 2}).get_json()
    assert [n["id"] for n in body["notifications"]] == [mine[2].id, mine[1].id]
    assert body["counts"]["unread"] == 3
    rest = _feed(client, _token(issuer), query_string={"limit": 2, "cursor": body["next_cursor"]}).get_json()
    assert [n["id"] for n in rest["notifications"]] == [mine[0].id] and rest["next_cursor"] is None


def test_another_members_ids_are_404_and_stay_unread(client, issuer, member):
    theirs = NotificationFactory(user_id=UserFactory().id)
    token = _token(issuer)
    for action in ("read", "archive", "unarchive", "snooze", "unsnooze", "mute"):
        assert _feed(client, token, "POST", f"/notifications/{theirs.id}/{action}", json={}).status_code == 404
    assert _feed(client, token, "POST", "/announcements/999999/read").status_code == 404
    assert (
        db.session.execute(sa.text("SELECT read_at FROM notifications WHERE id = :i"), {"i": theirs.id}).scalar()
        is None
    )


def test_mark_read_is_idempotent_and_read_all_empties_the_badge(client, issuer, member):
    first, second = NotificationFactory.create_batch(2, user_id=member.id)
    token = _token(issuer)
    once = _feed(client, token, "POST", f"/notifications/{first.id}/read").get_json()
    twice = _feed(client, token, "POST", f"/notifications/{first.id}/read").get_json()
    assert once["counts"]["unread"] == twice["counts"]["unread"] == 1
    assert once["notification"]["read_at"] == twice["notification"]["read_at"]
    everything = _feed(client, token, "POST", "/read-all").get_json()
    assert everything["changed"] is True and everything["counts"]["unread"] == 0
    assert _feed(client, token, "POST", "/read-all").get_json()["changed"] is False


def test_snooze_and_archive_move_the_row(client, issuer, member):
    row = NotificationFactory(user_id=member.id)
    token = _token(issuer)
    assert _feed(client, token, "POST", f"/notifications/{row.id}/snooze", json={"choice": "hour"}).status_code == 200
    assert _feed(client, token, query_string={"filter": "snoozed"}).get_json()["notifications"][0]["id"] == row.id
    assert _feed(client, token, "POST", f"/notifications/{row.id}/snooze", json={"choice": "soon"}).status_code == 422
    assert _feed(client, token, "POST", f"/notifications/{row.id}/unsnooze").status_code == 200
    assert _feed(client, token, "POST", f"/notifications/{row.id}/archive").get_json()["notification"]["archived_at"]


def test_preferences_read_and_change_with_mandatory_types_locked(client, issuer, member):
    NotificationTypeFactory(type="comment", default_email=False)
    NotificationTypeFactory(type="security", mandatory=True, default_email=True)
    token = _token(issuer)
    types = {t["type"]: t for t in _feed(client, token, path="/preferences").get_json()["types"]}
    assert types["security"]["mandatory"] and types["comment"]["channels"]["email"] is False
    changed = _feed(client, token, "PUT", "/preferences", json={"type": "comment", "channel": "email", "enabled": True})
    assert {t["type"]: t for t in changed.get_json()["types"]}["comment"]["channels"]["email"] is True
    locked = _feed(
        client, token, "PUT", "/preferences", json={"type": "security", "channel": "email", "enabled": False}
    )
    assert locked.status_code == 422 and locked.mimetype == "application/problem+json"


# --- CORS ------------------------------------------------------------------------------------------------


def test_a_preflight_from_an_allowed_origin_is_answered(client, allowed_origin):
    response = client.options(
        "/v1/feed/counts",
        headers={"Origin": allowed_origin, "Access-Control-Request-Method": "GET",
                 "Access-Control-Request-Headers": "authorization"},
    )  # fmt: skip
    assert response.status_code == 204
    assert response.headers["Access-Control-Allow-Origin"] == allowed_origin
    assert "Authorization" in response.headers["Access-Control-Allow-Headers"]
    assert "Access-Control-Allow-Credentials" not in response.headers
    assert "Origin" in response.headers["Vary"]


def test_a_preflight_or_call_from_another_origin_is_refused(client, issuer, member, allowed_origin):
    response = client.options(
        "/v1/feed/counts", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"}
    )
    assert response.status_code == 403 and "Access-Control-Allow-Origin" not in response.headers
    call = _feed(client, _token(issuer), path="/counts", headers={"Origin": "https://evil.example"})
    assert call.status_code == 403 and "Access-Control-Allow-Origin" not in call.headers
    ok = _feed(client, _token(issuer), path="/counts", headers={"Origin": allowed_origin})
    assert ok.status_code == 200 and ok.headers["Access-Control-Allow-Origin"] == allowed_origin


def test_with_no_allowed_origins_every_cross_origin_call_is_refused(client, issuer, member):
    call = _feed(client, _token(issuer), path="/counts", headers={"Origin": HOST})
    assert call.status_code == 403


# --- input: pydantic models, problem+json naming the field, in the reader's language ----------------------

JA = {"Accept-Language": "ja"}


def test_a_preference_change_of_the_wrong_shape_names_the_field_in_both_languages(client, issuer, member):
    NotificationTypeFactory(type="comment")
    token = _token(issuer)
    body = {"type": "comment", "channel": "email", "enabled": "yes"}
    english = _feed(client, token, "PUT", "/preferences", json=body)
    japanese = _feed(client, token, "PUT", "/preferences", json=body, headers=JA)
    assert english.status_code == japanese.status_code == 422
    assert english.mimetype == "application/problem+json"
    assert english.get_json()["errors"] == [{"field": "enabled", "message": "Input should be a valid boolean"}]
    (in_japanese,) = japanese.get_json()["errors"]
    assert in_japanese["field"] == "enabled" and in_japanese["message"] == "true か false にしてください"
    channel = _feed(client, token, "PUT", "/preferences", json={**body, "channel": "fax", "enabled": True})
    assert [e["field"] for e in channel.get_json()["errors"]] == ["channel"]
    unknown = _feed(client, token, "PUT", "/preferences", json={**body, "type": "nope", "enabled": True})
    assert unknown.status_code == 422 and [e["field"] for e in unknown.get_json()["errors"]] == ["type"]


def test_the_page_refuses_what_its_document_does_not_allow(client, issuer, member):
    token = _token(issuer)
    for query, field in (({"limit": 51}, "limit"), ({"filter": "starred"}, "filter"), ({"page": 2}, "page"),
                         ({"cursor": "not-a-cursor"}, "cursor")):  # fmt: skip
        response = _feed(client, token, query_string=query)
        assert response.status_code == 422, query
        assert [e["field"] for e in response.get_json()["errors"]] == [field]


def test_a_snooze_time_that_cannot_be_used_names_until(client, issuer, member):
    row = NotificationFactory(user_id=member.id)
    token = _token(issuer)
    past = _feed(client, token, "POST", f"/notifications/{row.id}/snooze", json={"until": "2001-01-01T09:00"})
    assert past.status_code == 422 and [e["field"] for e in past.get_json()["errors"]] == ["until"]
    shape = _feed(client, token, "POST", f"/notifications/{row.id}/snooze", json={"until": "tomorrow at 9"})
    assert shape.get_json()["errors"] == [
        {"field": "until", "message": "must be a local date and time such as 2026-12-01T09:00"}
    ]


def test_a_feed_body_over_the_api_limit_is_413_unread(app, client, issuer, member, monkeypatch):
    token = _token(issuer)
    monkeypatch.setitem(app.config, "API_MAX_BODY_BYTES", 1024)
    body = {"type": "comment", "channel": "email", "enabled": True, "pad": "x" * 2000}
    response = _feed(client, token, "PUT", "/preferences", json=body)
    assert response.status_code == 413 and response.mimetype == "application/problem+json"
    assert response.get_json()["detail"] == "The body is larger than 1024 bytes."
