"""Attack: an API key used beyond its purpose. Issue 14, item 9.

Before scopes every key could do everything: read any notification by walking its sequential id,
erase or rewrite any recipient, and mint sign-in links (impersonate any member). The attacker here
holds one leaked or over-shared key and tries each of those; a key given the right scope still works;
the CLI and the console set scopes; a revoked key stays 401 whatever its scopes.
"""

from __future__ import annotations

import re
import uuid

import pytest
import sqlalchemy as sa

from app.api_keys import service as keys
from app.api_keys.scopes import SCOPES
from app.extensions import db
from app.models import ApiKey, AuditEntry
from tests.api.conftest import Api, count, send_body
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.html import attrs

ALL = tuple(SCOPES)  # every scope the server knows (app/api_keys/scopes.py)


def new_key(name: str, *scopes: str) -> str:
    """A new key with exactly these scopes, set in the table as any operator tool would."""
    key = keys.create_api_key(None, name)
    db.session.execute(
        sa.text("UPDATE api_keys SET scopes = CAST(:s AS text[]) WHERE prefix = :p"),
        {"s": list(scopes), "p": keys.key_prefix(key)},
    )
    return key


@pytest.fixture
def key_with(client):
    """Return an Api client for a new key with exactly the given scopes."""

    def make(*scopes: str, name: str = "svc") -> Api:
        return Api(client, new_key(name, *scopes))

    return make


@pytest.fixture
def victim():
    """A member of the product whom the attacker wants to read, erase or impersonate."""
    NotificationTypeFactory(type="comment", default_email=True)
    return UserFactory(external_id=f"victim-{uuid.uuid4().hex[:8]}", email="victim@example.com")


@pytest.fixture
def victims_notification(key_with, victim) -> int:
    """A notification sent to the victim through another service's key (which may read it back)."""
    owner = key_with("notifications:write", "notifications:read", name="owner")
    response = owner.post("/v1/notifications", send_body(victim.external_id, title="Your password reset code 4711"))
    assert response.status_code == 202
    nid = response.get_json()["results"][0]["notification_id"]
    assert owner.get(f"/v1/notifications/{nid}").status_code == 200  # the creating key reads it back
    return nid


def assert_insufficient_scope(response, scope: str) -> None:
    assert response.status_code == 403
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["type"].endswith("insufficient_scope") and body["status"] == 403 and body["title"]
    assert scope in body["detail"] and body["scope"] == scope
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ") and 'error="insufficient_scope"' in challenge
    assert f'scope="{scope}"' in challenge


# --- reading other services' notifications by sequential id ---------------------------------------


def test_a_reading_key_walks_the_ids_and_finds_nothing_it_did_not_send(key_with, victims_notification):
    attacker = key_with("notifications:write", "notifications:read", name="attacker")
    missing = attacker.get(f"/v1/notifications/{victims_notification + 10_000}")
    assert missing.status_code == 404
    for nid in range(max(1, victims_notification - 5), victims_notification + 5):
        response = attacker.get(f"/v1/notifications/{nid}")
        # 404, word for word what a missing id gets: the answer does not even confirm the row exists
        assert response.status_code == 404, nid
        assert response.get_json() == missing.get_json()
        assert b"4711" not in response.data


def test_a_sending_key_cannot_read_at_all_and_learns_nothing_about_ids(key_with, victims_notification):
    attacker = key_with("notifications:write", name="attacker")  # the default scope of a new key
    existing = attacker.get(f"/v1/notifications/{victims_notification}")
    missing = attacker.get(f"/v1/notifications/{victims_notification + 10_000}")
    assert_insufficient_scope(existing, "notifications:read")
    assert existing.get_json() == missing.get_json()  # same answer for a real and a missing id
    assert b"4711" not in existing.data


def test_a_dedupe_repeat_names_the_victims_row_but_does_not_open_it(key_with, victim, victims_notification):
    # Same recipient and dedupe key as the victim's service: the 202 answers with the existing row's id.
    attacker = key_with("notifications:write", "notifications:read", name="attacker")
    dedupe_key = db.session.execute(
        sa.text("SELECT dedupe_key FROM notifications WHERE id = :id"), {"id": victims_notification}
    ).scalar_one()
    repeat = attacker.post("/v1/notifications", send_body(victim.external_id, dedupe_key=dedupe_key))
    assert repeat.get_json()["results"][0] == {
        "recipient": victim.external_id,
        "notification_id": victims_notification,
        "status": "existing",
    }
    assert attacker.get(f"/v1/notifications/{victims_notification}").status_code == 404


def test_the_ingest_records_the_key_that_created_each_row(key_with, victim):
    sender = key_with("notifications:write", name="sender")
    response = sender.post("/v1/notifications", send_body(victim.external_id))
    nid = response.get_json()["results"][0]["notification_id"]
    recorded = db.session.execute(sa.text("SELECT api_key_id FROM notifications WHERE id = :id"), {"id": nid})
    assert recorded.scalar_one() == keys.authenticate(sender.key).id


# --- erasing or rewriting recipients ---------------------------------------------------------------


@pytest.mark.parametrize(
    "scopes", [("notifications:write",), ("notifications:write", "notifications:read", "links:create")]
)
def test_a_key_without_users_write_cannot_erase_or_rewrite_a_recipient(key_with, victim, scopes):
    attacker = key_with(*scopes, name="attacker")
    erased = attacker.delete(f"/v1/users/{victim.external_id}", idempotency_key=str(uuid.uuid4()))
    assert_insufficient_scope(erased, "users:write")
    hijacked = attacker.put(f"/v1/users/{victim.external_id}", {"email": "attacker@evil.example"})
    assert_insufficient_scope(hijacked, "users:write")
    planted = attacker.put("/v1/users/planted-by-attacker", {"email": "x@evil.example"})
    assert_insufficient_scope(planted, "users:write")
    db.session.refresh(victim)
    assert victim.email == "victim@example.com"
    assert count("users", "external_id = :e", e="planted-by-attacker") == 0
    assert count("idempotency_keys") == 0  # refused before the Idempotency-Key was even claimed


# --- minting sign-in links (impersonation) ---------------------------------------------------------


@pytest.mark.parametrize(
    "scopes", [("notifications:write",), ("notifications:write", "notifications:read", "users:write")]
)
def test_a_key_without_links_create_cannot_mint_a_sign_in_link(key_with, victim, scopes):
    attacker = key_with(*scopes, name="attacker")
    for headers in ({}, {"Idempotency-Key": str(uuid.uuid4())}):
        response = attacker.post(f"/v1/users/{victim.external_id}/login-links", headers=headers)
        assert_insufficient_scope(response, "links:create")
        assert "url" not in response.get_json()
    assert count("login_links") == 0


def test_an_unknown_user_gets_the_same_403_so_scopes_hide_who_exists(key_with):
    attacker = key_with("notifications:write", name="attacker")
    assert_insufficient_scope(attacker.post("/v1/users/nobody-at-all/login-links"), "links:create")
    assert_insufficient_scope(attacker.delete("/v1/users/nobody-at-all"), "users:write")


# --- the right scope still works -------------------------------------------------------------------


def test_keys_with_the_right_scope_succeed(key_with, victim):
    users = key_with("users:write", name="crm")
    assert users.put(f"/v1/users/{victim.external_id}", {"display_name": "Vic"}).status_code == 200
    links = key_with("links:create", name="sso")
    minted = links.post(f"/v1/users/{victim.external_id}/login-links")
    assert minted.status_code == 201 and "/login/link/" in minted.get_json()["url"]
    external_id = victim.external_id
    assert users.delete(f"/v1/users/{external_id}").status_code == 204
    assert count("users", "external_id = :e", e=external_id) == 0
    # a key that may only read cannot send
    reader = key_with("notifications:read", name="reader")
    assert_insufficient_scope(reader.post("/v1/notifications", send_body("anyone")), "notifications:write")


def test_narrowing_a_key_takes_effect_on_its_next_request(key_with, victim):
    crm = key_with("users:write", name="crm")
    assert crm.put(f"/v1/users/{victim.external_id}", {"display_name": "A"}).status_code == 200  # now cached
    keys.set_scopes(None, keys.key_prefix(crm.key), ["notifications:write"])
    assert_insufficient_scope(crm.put(f"/v1/users/{victim.external_id}", {"display_name": "B"}), "users:write")


# --- revoked keys ----------------------------------------------------------------------------------


def test_a_revoked_key_is_401_whatever_its_scopes(key_with, victim, victims_notification):
    leaked = key_with(*ALL, name="leaked")
    assert leaked.put(f"/v1/users/{victim.external_id}", {"display_name": "V"}).status_code == 200
    keys.revoke_api_key(None, keys.key_prefix(leaked.key))
    for method, path in [
        ("GET", f"/v1/notifications/{victims_notification}"),
        ("DELETE", f"/v1/users/{victim.external_id}"),
        ("PUT", f"/v1/users/{victim.external_id}"),
        ("POST", f"/v1/users/{victim.external_id}/login-links"),
        ("POST", "/v1/notifications"),
    ]:
        response = leaked.call(method, path, json={})
        assert response.status_code == 401, (method, path)
        assert "insufficient_scope" not in response.headers.get("WWW-Authenticate", "")


# --- the CLI and the console set scopes ------------------------------------------------------------


def _scopes_of(prefix: str) -> list[str]:
    return db.session.execute(sa.select(ApiKey.scopes).where(ApiKey.prefix == prefix)).scalar_one()


def test_cli_creates_keys_with_the_scopes_asked_for_and_lists_them(app, client):
    runner = app.test_cli_runner()
    plain = runner.invoke(args=["api-keys", "create", "ingest"])
    assert plain.exit_code == 0, plain.output
    plain_key = plain.stdout.splitlines()[0]
    assert _scopes_of(keys.key_prefix(plain_key)) == ["notifications:write"]  # least privilege by default
    sso = runner.invoke(args=["api-keys", "create", "sso", "--scope", "links:create", "--scope", "users:write"])
    assert sso.exit_code == 0, sso.output
    sso_key = sso.stdout.splitlines()[0]
    assert _scopes_of(keys.key_prefix(sso_key)) == ["users:write", "links:create"]
    listed = runner.invoke(args=["api-keys", "list"]).output
    assert "users:write,links:create" in listed and "notifications:write" in listed
    bad = runner.invoke(args=["api-keys", "create", "x", "--scope", "admin"])
    assert bad.exit_code != 0 and "admin" in bad.output
    assert db.session.scalar(sa.select(sa.func.count()).select_from(ApiKey)) == 2
    victim = UserFactory(external_id="cli-victim")
    minted = Api(client, plain_key).post(f"/v1/users/{victim.external_id}/login-links")
    assert_insufficient_scope(minted, "links:create")
    assert Api(client, sso_key).post(f"/v1/users/{victim.external_id}/login-links").status_code == 201


def test_console_sets_scopes_on_create_and_edits_them_audited(client, csrf, login_as):
    admin = login_as(UserFactory(role="admin"))
    created = client.post(
        "/console/api-keys", headers=csrf(), data={"name": "crm", "scopes": ["users:write", "notifications:write"]}
    )
    assert created.status_code == 201
    row = db.session.scalars(sa.select(ApiKey)).one()
    assert row.scopes == ["notifications:write", "users:write"]
    edited = client.post(
        f"/console/api-keys/{row.prefix}/scopes", headers=csrf(), data={"scopes": ["notifications:write"]}
    )
    assert edited.status_code == 302
    db.session.refresh(row)
    assert row.scopes == ["notifications:write"]
    entry = db.session.scalars(sa.select(AuditEntry).where(AuditEntry.action == "api_key.scopes")).one()
    assert (entry.actor_id, entry.target_id) == (admin.id, row.prefix)
    assert entry.before == {"scopes": ["notifications:write", "users:write"]}
    assert entry.after == {"scopes": ["notifications:write"]}
    page = client.get("/console/api-keys").get_data(as_text=True)
    assert "links:create" in page and "Save scopes" in page


def test_console_refuses_unknown_or_no_scopes(client, csrf, login_as):
    login_as(UserFactory(role="admin"))
    page = client.get("/console/api-keys").get_data(as_text=True)
    ticked = attrs(page, 'input[name="scopes"][checked]', "value")
    assert ticked == ["notifications:write"]  # a new key starts with sending only
    for data in ({"name": "svc"}, {"name": "svc", "scopes": ["admin"]}):
        assert client.post("/console/api-keys", headers=csrf(), data=data).status_code == 422
    assert db.session.scalar(sa.select(sa.func.count()).select_from(ApiKey)) == 0
    client.post("/console/api-keys", headers=csrf(), data={"name": "svc", "scopes": "notifications:write"})
    row = db.session.scalars(sa.select(ApiKey)).one()
    assert row.scopes == ["notifications:write"]
    for data in ({"scopes": ["admin"]}, {"scopes": ["notifications:write", "root"]}, {}):
        client.post(f"/console/api-keys/{row.prefix}/scopes", headers=csrf(), data=data)
        db.session.refresh(row)
        assert row.scopes == ["notifications:write"], data


def test_an_operator_cannot_widen_a_key(client, csrf, login_as):
    prefix = keys.key_prefix(new_key("svc", "notifications:write"))
    login_as(UserFactory(role="operator"))
    response = client.post(f"/console/api-keys/{prefix}/scopes", headers=csrf(), data={"scopes": list(ALL)})
    assert response.status_code == 403
    assert _scopes_of(prefix) == ["notifications:write"]


# --- every endpoint declares its scope, and the OpenAPI document says which ------------------------


def test_every_api_endpoint_declares_the_scope_its_document_names(app, client):
    spec = client.get("/v1/openapi.json").get_json()
    documented = {
        (method.upper(), path): requirement["bearerAuth"][0]
        for path, item in spec["paths"].items()
        for method, operation in item.items()
        for requirement in operation["security"]
        if "bearerAuth" in requirement
    }
    found = {}
    for rule in app.url_map.iter_rules():
        if not rule.endpoint.startswith("api.") or rule.endpoint in {"api.ping", "api.openapi_document"}:
            continue
        scope = getattr(app.view_functions[rule.endpoint], "required_scope", None)
        assert scope in ALL, rule.endpoint
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)  # Flask's <int:x> is OpenAPI's {x}
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            found[(method, path)] = scope
    assert found == documented


def test_openapi_lists_each_operations_scope(client):
    spec = client.get("/v1/openapi.json").get_json()
    assert spec["paths"]["/v1/users/{external_id}"]["delete"]["security"] == [{"bearerAuth": ["users:write"]}]
    login = spec["paths"]["/v1/users/{external_id}/login-links"]["post"]
    assert login["security"] == [{"bearerAuth": ["links:create"]}] and "403" in login["responses"]
    description = spec["components"]["securitySchemes"]["bearerAuth"]["description"]
    assert all(scope in description for scope in ALL)
