"""Bearer API keys (401s, no cookies, last_used_at), per-key rate limits, CSRF exemption."""

from __future__ import annotations

import time

import sqlalchemy as sa
from flask import Response, request
from limits.strategies import FixedWindowRateLimiter

from app.api import ratelimit
from app.api_keys import service as keys
from app.extensions import db, limiter
from app.ratelimit_storage import HitAwareRedisStorage
from tests.api.conftest import send_body
from tests.factories import UserFactory
from tests.support.waiting import free_port


def _last_used(key: str):
    return db.session.execute(
        sa.text("SELECT last_used_at FROM api_keys WHERE prefix = :p"), {"p": keys.key_prefix(key)}
    ).scalar_one()


def test_missing_key_is_401_with_a_challenge(client):
    response = client.get("/v1/notifications/1")
    assert response.status_code == 401
    assert response.mimetype == "application/problem+json"
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="hato"'
    assert "Authorization: Bearer" in response.get_json()["detail"]


def test_unknown_or_malformed_keys_are_401(client, api_key):
    wrong = api_key[:-4] + ("AAAA" if not api_key.endswith("AAAA") else "BBBB")
    for header in (f"Bearer {wrong}", "Bearer hato_short", f"Basic {api_key}", api_key, "Bearer "):
        assert client.get("/v1/notifications/1", headers={"Authorization": header}).status_code == 401


def test_revoked_key_is_401(client, api_key):
    assert client.get("/v1/notifications/1", headers={"Authorization": f"Bearer {api_key}"}).status_code == 404
    keys.revoke_api_key(None, keys.key_prefix(api_key))
    assert client.get("/v1/notifications/1", headers={"Authorization": f"Bearer {api_key}"}).status_code == 401


def test_session_cookie_is_never_accepted(client, login_as, csrf):
    login_as(UserFactory(role="admin"))
    assert client.get("/v1/notifications/1").status_code == 401
    assert client.post("/v1/notifications", json={}, headers=csrf()).status_code == 401


def test_api_needs_no_csrf_token_and_sets_no_cookie(api, comment_type, recipient):
    response = api.post("/v1/notifications", send_body(recipient.external_id))
    assert response.status_code == 202
    assert "Set-Cookie" not in response.headers
    assert response.headers["Cache-Control"] == "no-store"


def test_a_session_cookie_riding_along_is_neither_read_nor_refreshed(app, api, login_as, comment_type, recipient):
    login_as(UserFactory(role="admin"))
    response = api.post("/v1/notifications", send_body(recipient.external_id))
    assert response.status_code == 202
    assert "Set-Cookie" not in response.headers and "Cookie" not in response.headers.get("Vary", "")
    assert api.client.get("/inbox").status_code == 200  # the browser's session is still there for its pages


def test_only_the_hash_and_prefix_are_stored(api_key):
    row = db.session.execute(sa.text("SELECT prefix, key_hash FROM api_keys")).one()
    assert api_key.startswith("hato_") and len(api_key) > 40
    assert row.prefix == api_key[:13] and row.key_hash == keys.hash_key(api_key)
    assert api_key not in (row.prefix, row.key_hash)


def test_a_revocation_elsewhere_applies_once_the_cache_expires(client, api_key, monkeypatch):
    headers = {"Authorization": f"Bearer {api_key}"}
    assert client.get("/v1/notifications/1", headers=headers).status_code == 404
    # Another process revokes it: this one trusts its verification for CACHE_SECONDS more.
    db.session.execute(sa.text("UPDATE api_keys SET revoked_at = now()"))
    assert client.get("/v1/notifications/1", headers=headers).status_code == 404
    digest = keys.hash_key(api_key)
    monkeypatch.setitem(keys._verified, digest, (keys._verified[digest][0], 0.0))  # CACHE_SECONDS later
    assert client.get("/v1/notifications/1", headers=headers).status_code == 401


def test_last_used_is_written_at_most_once_a_minute(api, api_key, monkeypatch):
    monkeypatch.setattr(keys, "CACHE_SECONDS", 0)
    assert _last_used(api_key) is None
    api.get("/v1/notifications/1")
    first = _last_used(api_key)
    assert first is not None
    api.get("/v1/notifications/1")
    assert _last_used(api_key) == first
    db.session.execute(sa.text("UPDATE api_keys SET last_used_at = last_used_at - interval '2 minutes'"))
    api.get("/v1/notifications/1")
    assert _last_used(api_key) == first  # touched again (now() is the test transaction's start)


def test_rate_limit_is_per_key_with_headers(app, client, api_key, monkeypatch):
    monkeypatch.setitem(app.config, "API_RATE_LIMIT", "3 per minute")
    headers = {"Authorization": f"Bearer {api_key}"}
    statuses = [client.get("/v1/notifications/1", headers=headers).status_code for _ in range(3)]
    assert statuses == [404, 404, 404]
    limited = client.get("/v1/notifications/1", headers=headers)
    assert limited.status_code == 429
    assert limited.mimetype == "application/problem+json"
    assert 0 < int(limited.headers["Retry-After"]) <= 60
    assert limited.headers["RateLimit-Limit"] == "3" and limited.headers["RateLimit-Remaining"] == "0"
    assert 0 <= int(limited.headers["RateLimit-Reset"]) <= 60
    other_key = keys.create_api_key(None, "other", ["notifications:read"])
    assert client.get("/v1/notifications/1", headers={"Authorization": f"Bearer {other_key}"}).status_code == 404


def test_every_limited_answer_carries_its_rate_limit_headers(app, client, api_key, redis_client, monkeypatch):
    monkeypatch.setitem(app.config, "API_RATE_LIMIT", "5 per minute; 50 per hour")
    headers = {"Authorization": f"Bearer {api_key}"}
    first, second = (client.get("/v1/notifications/1", headers=headers) for _ in range(2))
    # The smallest window speaks; X-RateLimit-Reset is its end as an epoch, the others are seconds.
    assert first.headers["RateLimit-Limit"] == "5" and first.headers["RateLimit-Remaining"] == "4"
    assert second.headers["RateLimit-Remaining"] == "3"
    assert 0 <= int(second.headers["RateLimit-Reset"]) <= 60 and 0 <= int(second.headers["Retry-After"]) <= 60
    assert abs(int(second.headers["X-RateLimit-Reset"]) - time.time()) <= 61
    # Counted once per request and window, under the keys Flask-Limiter's shared limit used (scope "api").
    counters = sorted(k.decode() for k in redis_client.keys("*api-key*"))
    assert len(counters) == 2 and all("/api/" in k for k in counters)
    assert [int(redis_client.get(k)) for k in counters] == [2, 2]
    unauthenticated = client.get("/v1/notifications/1")
    assert unauthenticated.status_code == 401 and unauthenticated.headers["RateLimit-Remaining"] == "4"


def test_a_later_retry_after_of_the_answer_is_kept(app, monkeypatch):
    monkeypatch.setitem(app.config, "API_RATE_LIMIT", "5 per minute")
    with app.test_request_context("/v1/notifications/1"):
        ratelimit.check("api-key:retry-after-test")
        later = ratelimit.add_headers(Response(status=503, headers={"Retry-After": "1000"}))
        sooner = ratelimit.add_headers(Response(status=409, headers={"Retry-After": "1"}))
    assert later.headers["Retry-After"] == "1000"
    assert sooner.headers["Retry-After"] == sooner.headers["RateLimit-Reset"]  # the window's end, as before


def test_a_failing_rate_limit_storage_counts_in_memory(app, client, api_key, monkeypatch):
    dead = f"redis://127.0.0.1:{free_port()}/0"
    monkeypatch.setitem(app.config, "API_RATE_LIMIT", "2 per minute")
    monkeypatch.setattr(limiter, "_storage", HitAwareRedisStorage("hato+" + dead))
    monkeypatch.setattr(limiter, "_limiter", FixedWindowRateLimiter(limiter._storage))
    monkeypatch.setattr(ratelimit, "_fallback", ratelimit._Fallback())
    headers = {"Authorization": f"Bearer {api_key}"}
    statuses = [client.get("/v1/notifications/1", headers=headers) for _ in range(3)]
    assert [r.status_code for r in statuses] == [404, 404, 429]
    assert statuses[0].headers["RateLimit-Remaining"] == "1"
    assert ratelimit._fallback.failed_until > time.monotonic()


def test_ping_and_spec_need_no_key_and_no_rate_limit(app, client, monkeypatch):
    monkeypatch.setitem(app.config, "API_RATE_LIMIT", "1 per minute")
    assert [client.get("/v1/ping").status_code for _ in range(3)] == [200, 200, 200]
    assert client.get("/v1/ping").get_json() == {"ok": True}
    assert client.get("/v1/openapi.json").status_code == 200


def test_unknown_api_paths_and_methods_are_problem_documents(api):
    for response in (api.get("/v1/nothing-here"), api.call("PATCH", "/v1/notifications")):
        assert response.status_code in (404, 405)
        assert response.mimetype == "application/problem+json"


def test_flask_limiters_own_hooks_step_aside_for_the_api_only(app, api, comment_type, recipient, monkeypatch):
    """All three of its hooks are found (a Flask-Limiter upgrade that moves them fails here, not silently)."""
    registries = (app.before_request_funcs, app.after_request_funcs, app.teardown_request_funcs)
    wrapped = [hook for registry in registries for hook in registry[None] if hook.__name__ == "hook_unless_blueprint"]
    assert len(wrapped) == 3
    assert not any(getattr(hook, "__self__", None) is limiter for registry in registries for hook in registry[None])
    seen: list[str] = []
    identify = limiter.identify_request  # the first thing its before-request hook does
    monkeypatch.setattr(limiter, "identify_request", lambda: seen.append(request.path) or identify())
    assert api.post("/v1/notifications", send_body(recipient.external_id)).status_code == 202
    assert api.client.get("/login").status_code == 200
    assert set(seen) == {"/login"}  # pages are still checked by Flask-Limiter; the API call was not
