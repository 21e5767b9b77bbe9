"""/v1/tenants/<key> (GET, PUT, DELETE, …/preferences), PUT /v1/users' tenants and POST /v1/notifications' tenant.

Issue 32, item 4: the rules of a tenant's branding (422 naming the field, nothing stored), scopes, the audit log,
and the ingest's membership check (422 naming the outsiders, nothing written for anyone).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.api_keys.service import create_api_key
from app.extensions import db
from app.models import AuditEntry
from tests.api.conftest import Api, count, send_body
from tests.factories import NotificationTypeFactory, UserFactory

URL = "/v1/tenants/acme"
ACME = {"name": "Acme Inc.", "logo_url": "https://cdn.acme.example/logo.png", "primary_color": "#1A73E8",
        "email_sender_name": "Acme via Hato", "reply_to": "support@acme.example"}  # fmt: skip


def audit(action: str) -> list[AuditEntry]:
    return db.session.query(AuditEntry).filter_by(action=action).order_by(AuditEntry.id).all()


def tenant_row(key: str = "acme"):
    return db.session.execute(sa.text("SELECT * FROM tenants WHERE key = :k"), {"k": key}).mappings().first()


@pytest.fixture
def acme(api):
    assert api.put(URL, ACME).status_code == 201
    return tenant_row()


def test_put_creates_then_updates_only_the_fields_sent(api):
    created = api.put(URL, ACME)

    assert created.status_code == 201
    body = created.get_json()
    assert body["key"] == "acme" and body["name"] == "Acme Inc." and body["primary_color"] == "#1a73e8"
    assert (body["logo_url"], body["email_sender_name"], body["reply_to"], body["members"]) == (
        ACME["logo_url"], "Acme via Hato", "support@acme.example", 0)  # fmt: skip

    updated = api.put(URL, {"name": "Acme Corp", "reply_to": None})
    assert updated.status_code == 200
    body = updated.get_json()
    assert (body["name"], body["reply_to"], body["logo_url"]) == ("Acme Corp", None, ACME["logo_url"])
    assert api.get(URL).get_json() == body
    assert [e.action for e in audit("tenant.create") + audit("tenant.update")] == ["tenant.create", "tenant.update"]
    update = audit("tenant.update")[0]
    assert update.before["name"] == "Acme Inc." and update.after["name"] == "Acme Corp"
    assert update.actor_label.startswith("api key tests")


def test_a_new_tenant_needs_a_name(api):
    response = api.put(URL, {"primary_color": "#000000"})

    assert response.status_code == 422
    assert [e["field"] for e in response.get_json()["errors"]] == ["name"]
    assert tenant_row() is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("logo_url", "http://cdn.acme.example/logo.png"),
        ("logo_url", "javascript:alert(1)"),
        ("logo_url", "data:image/png;base64,AAAA"),
        ("logo_url", "https://127.0.0.1/logo.png"),
        ("logo_url", "https://10.0.0.5/logo.png"),
        ("logo_url", "https://[::1]/logo.png"),
        ("logo_url", "https://169.254.169.254/latest/meta-data"),
        ("logo_url", "https://localhost/logo.png"),
        ("logo_url", "https://printer.local/logo.png"),
        ("logo_url", "https://user:pw@cdn.acme.example/logo.png"),
        ("logo_url", "https://cdn.acme.example/%0d%0aSet-Cookie:x"),
        ("logo_url", "https://cdn.acme.example/a\\b"),
        ("logo_url", "//cdn.acme.example/logo.png"),
        ("primary_color", "red"),
        ("primary_color", "#12345"),
        ("primary_color", '#1234"><script>'),
        ("email_sender_name", "Acme\r\nBcc: victim@example.com"),
        ("email_sender_name", "A" * 65),
        ("reply_to", "not an address"),
        ("reply_to", "a@b.example\r\nBcc: c@d.example"),
        ("name", "   "),
    ],
)
def test_a_field_that_breaks_its_rule_is_422_naming_it_and_nothing_is_stored(api, acme, field, value):
    response = api.put(URL, {**ACME, "name": "Renamed", field: value})

    assert response.status_code == 422
    assert response.mimetype == "application/problem+json"
    assert field in [e["field"] for e in response.get_json()["errors"]]
    assert tenant_row()["name"] == "Acme Inc."  # nothing of the request was stored
    assert not audit("tenant.update")


def test_a_bad_key_in_the_path_is_refused(api):
    assert api.put("/v1/tenants/a%20b", ACME).status_code == 422
    assert api.get("/v1/tenants/a%20b").status_code == 404


def test_delete_removes_the_tenant_and_its_memberships_then_404(api, acme):
    UserFactory(external_id="m-1")
    assert api.put("/v1/users/m-1", {"tenants": ["acme"]}).status_code == 200

    assert api.delete(URL).status_code == 204
    assert tenant_row() is None and count("tenant_members") == 0
    assert api.delete(URL).status_code == 404 and api.get(URL).status_code == 404
    assert audit("tenant.delete")[0].before["name"] == "Acme Inc."


@pytest.mark.parametrize(
    ("scopes", "method", "path", "body", "needed"),
    [
        (["tenants:read"], "PUT", URL, ACME, "tenants:write"),
        (["tenants:read"], "DELETE", URL, None, "tenants:write"),
        (["tenants:read"], "PUT", URL + "/preferences", {"preferences": {}}, "tenants:write"),
        (["notifications:write"], "GET", URL, None, "tenants:read"),
        (["tenants:write"], "GET", URL + "/preferences", None, "tenants:read"),
    ],
)
def test_a_key_without_the_scope_is_403_and_changes_nothing(client, acme, scopes, method, path, body, needed):
    limited = Api(client, create_api_key(None, "limited", scopes))

    response = limited.call(method, path, body)

    assert response.status_code == 403 and response.get_json()["scope"] == needed
    assert tenant_row()["name"] == "Acme Inc."


def test_the_read_scope_reads(client, acme):
    reader = Api(client, create_api_key(None, "reader", ["tenants:read"]))
    assert reader.get(URL).status_code == 200 and reader.get(URL + "/preferences").status_code == 200


# --- members -------------------------------------------------------------------------------------------------------


def test_put_user_sets_and_replaces_the_members_tenants(api, acme):
    api.put("/v1/tenants/globex", {"name": "Globex"})

    first = api.put("/v1/users/m-1", {"email": "m1@example.com", "tenants": ["globex", "acme"]})
    assert first.status_code == 201 and first.get_json()["tenants"] == ["acme", "globex"]
    assert api.get(URL).get_json()["members"] == 1

    assert api.put("/v1/users/m-1", {"tenants": ["globex"]}).get_json()["tenants"] == ["globex"]
    assert api.put("/v1/users/m-1", {"display_name": "Kept"}).get_json()["tenants"] == ["globex"]
    assert api.put("/v1/users/m-1", {"tenants": []}).get_json()["tenants"] == []
    assert [e.after for e in audit("tenant.members")] == [
        {"tenants": ["acme", "globex"]}, {"tenants": ["globex"]}, {"tenants": []}]  # fmt: skip


def test_an_unknown_tenant_is_422_naming_it_and_the_member_is_not_written(api, acme):
    response = api.put("/v1/users/m-2", {"email": "m2@example.com", "tenants": ["acme", "nope", "zilch"]})

    assert response.status_code == 422
    body = response.get_json()
    assert body["unknown_tenants"] == ["nope", "zilch"] and "'nope'" in body["detail"]
    assert count("users", "external_id = 'm-2'") == 0 and count("tenant_members") == 0


# --- notifications -------------------------------------------------------------------------------------------------


@pytest.fixture
def members(api, acme):
    NotificationTypeFactory(type="comment", default_email=True)
    for ref in ("in-1", "in-2"):
        UserFactory(external_id=ref)
        api.put(f"/v1/users/{ref}", {"tenants": ["acme"]})
    UserFactory(external_id="out-1")
    api.put("/v1/tenants/globex", {"name": "Globex"})
    api.put("/v1/users/out-1", {"tenants": ["globex"]})
    return acme


def test_a_notification_for_a_tenant_carries_it(api, members):
    response = api.post("/v1/notifications", send_body("in-1", "in-2", tenant="acme"))

    assert response.status_code == 202 and response.get_json()["created"] == 2
    assert count("notifications", "tenant_id = :t", t=members["id"]) == 2
    assert count("notification_deliveries", "channel = 'email'") == 2


def test_a_recipient_outside_the_tenant_is_422_naming_them_and_nothing_is_written(api, members):
    response = api.post("/v1/notifications", send_body("in-1", "out-1", "in-2", tenant="acme"))

    assert response.status_code == 422
    body = response.get_json()
    assert body["outside_tenant"] == ["out-1"] and body["errors"][0]["field"] == "tenant"
    assert count("notifications") == 0 and count("notification_deliveries") == 0


def test_an_unknown_tenant_on_a_notification_is_422_naming_it(api, members):
    response = api.post("/v1/notifications", send_body("in-1", tenant="nope"))

    assert response.status_code == 422 and response.get_json()["unknown_tenants"] == ["nope"]
    assert count("notifications") == 0


def test_without_a_tenant_nothing_changes(api, members):
    response = api.post("/v1/notifications", send_body("in-1", "out-1"))

    assert response.status_code == 202
    assert count("notifications", "tenant_id IS NULL") == 2


def test_the_same_content_for_two_tenants_is_two_notifications(api, members):
    api.put("/v1/users/in-1", {"tenants": ["acme", "globex"]})
    assert api.post("/v1/notifications", send_body("in-1", tenant="acme")).get_json()["created"] == 1
    assert api.post("/v1/notifications", send_body("in-1", tenant="globex")).get_json()["created"] == 1


def test_a_scheduled_notification_keeps_its_tenant_until_release(api, members, app):
    from app.notify.schedule import release_due

    response = api.post("/v1/notifications", send_body("in-1", tenant="acme", send_at="2099-01-01T00:00:00Z"))
    assert response.status_code == 422  # more than 90 days ahead
    refused = api.post("/v1/notifications", send_body("out-1", tenant="acme", send_at="2030-01-01T00:00:00Z"))
    assert refused.status_code == 422 and count("scheduled_notifications") == 0

    ahead = api.post("/v1/notifications", send_body("in-1", tenant="acme", send_at=_soon()))
    assert ahead.status_code == 202 and count("scheduled_notifications", "tenant_id = :t", t=members["id"]) == 1
    db.session.execute(sa.text("UPDATE scheduled_notifications SET send_at = now() - interval '1 second'"))
    release_due(100)
    assert count("notifications", "tenant_id = :t", t=members["id"]) == 1


def _soon() -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")


# --- default preferences ---------------------------------------------------------------------------------------------


def test_preferences_are_replaced_whole_and_read_back(api, members):
    NotificationTypeFactory(type="invoice")
    body = {"preferences": {"comment": {"email": False}, "invoice": {"email": True, "push": True}}}

    response = api.put(URL + "/preferences", body)

    assert response.status_code == 200
    assert response.get_json() == {"tenant": "acme", **body}
    assert api.get(URL + "/preferences").get_json()["preferences"] == body["preferences"]
    replaced = api.put(URL + "/preferences", {"preferences": {"invoice": {"push": False}}})
    assert replaced.get_json()["preferences"] == {"invoice": {"push": False}}
    assert len(audit("tenant.preferences")) == 2


def test_preferences_naming_an_unknown_type_or_channel_are_422_and_nothing_is_stored(api, members):
    api.put(URL + "/preferences", {"preferences": {"comment": {"email": False}}})

    response = api.put(URL + "/preferences", {"preferences": {"nope": {"email": True}, "comment": {"fax": True}}})

    assert response.status_code == 422
    fields = {e["field"] for e in response.get_json()["errors"]}
    assert fields == {"preferences.nope", "preferences.comment.fax"}
    assert api.get(URL + "/preferences").get_json()["preferences"] == {"comment": {"email": False}}


def test_the_openapi_document_covers_the_tenant_endpoints(client):
    spec = client.get("/v1/openapi.json").get_json()
    operations = {op["operationId"] for path, item in spec["paths"].items() if "tenants" in path
                  for op in item.values()}  # fmt: skip
    assert operations == {"getTenant", "putTenant", "deleteTenant", "getTenantPreferences", "putTenantPreferences"}
    assert "tenant" in spec["components"]["schemas"]["NotificationIn"]["properties"]
    assert "tenants" in spec["components"]["schemas"]["UserIn"]["properties"]
