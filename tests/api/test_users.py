"""PUT /v1/users/<external_id> (create or update) and DELETE (erase everything about the user)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import EmailSuppression, PushSubscription
from tests.api.conftest import count, send_body
from tests.factories import PreferenceFactory, UserFactory


def _user(external_id: str):
    row = db.session.execute(sa.text("SELECT * FROM users WHERE external_id = :x"), {"x": external_id})
    return row.mappings().first()


def test_put_creates_a_member_with_defaults(api):
    response = api.put("/v1/users/u-1", {"email": "ann@example.com", "display_name": "Ann"})
    assert response.status_code == 201
    assert response.get_json() == {
        "external_id": "u-1",
        "email": "ann@example.com",
        "display_name": "Ann",
        "locale": None,  # not chosen: pages follow Accept-Language, e-mail DEFAULT_LOCALE
        "timezone": "UTC",
        "phone": None,
        "phone_verified": False,
        "sms_opt_in": False,
        "properties": {},
        "tenants": [],
    }
    row = _user("u-1")
    assert row["role"] == "member" and row["password_hash"] is None


def test_put_again_updates_only_the_fields_sent(api):
    api.put("/v1/users/u-2", {"email": "bob@example.com", "display_name": "Bob", "timezone": "Asia/Tokyo"})
    response = api.put("/v1/users/u-2", {"locale": "ja-JP"})
    assert response.status_code == 200
    assert response.get_json() == {
        "external_id": "u-2",
        "email": "bob@example.com",
        "display_name": "Bob",
        "locale": "ja-JP",
        "timezone": "Asia/Tokyo",
        "phone": None,
        "phone_verified": False,
        "sms_opt_in": False,
        "properties": {},
        "tenants": [],
    }


def test_properties_are_set_replaced_whole_and_kept_when_left_out(api):
    assert api.put("/v1/users/u-3", {"properties": {"plan": "pro", "seats": 12}}).get_json()["properties"] == {
        "plan": "pro", "seats": 12}  # fmt: skip
    assert api.put("/v1/users/u-3", {"locale": "ja"}).get_json()["properties"] == {"plan": "pro", "seats": 12}
    assert api.put("/v1/users/u-3", {"properties": {"plan": "free"}}).get_json()["properties"] == {"plan": "free"}
    assert _user("u-3")["properties"] == {"plan": "free"}


def test_properties_over_their_size_are_422_naming_the_field_and_change_nothing(api):
    api.put("/v1/users/u-4", {"properties": {"plan": "pro"}})
    response = api.put("/v1/users/u-4", {"properties": {"notes": "x" * 5000}})
    assert response.status_code == 422
    assert [e["field"] for e in response.get_json()["errors"]] == ["properties"]
    assert _user("u-4")["properties"] == {"plan": "pro"}


def test_email_null_removes_the_address(api):
    api.put("/v1/users/u-3", {"email": "cy@example.com"})
    assert api.put("/v1/users/u-3", {"email": None}).get_json()["email"] is None


def test_an_address_of_another_user_is_409(api):
    UserFactory(email="taken@example.com")
    response = api.put("/v1/users/u-4", {"email": "TAKEN@example.com"})
    assert response.status_code == 409
    assert response.get_json()["errors"] == [{"field": "email", "message": "already used by another user"}]
    assert _user("u-4") is None
    assert api.put("/v1/users/u-4", {"display_name": "Still works"}).status_code == 201


def test_operator_accounts_cannot_be_changed_through_the_api(api):
    UserFactory(external_id="op-1", role="operator", display_name="Op")
    assert api.put("/v1/users/op-1", {"display_name": "Hijacked"}).status_code == 403
    assert _user("op-1")["display_name"] == "Op"
    assert api.delete("/v1/users/op-1").status_code == 403
    assert api.post("/v1/users/op-1/login-links").status_code == 403
    assert _user("op-1") is not None


@pytest.mark.parametrize(
    "body, field",
    [
        ({"email": "not-an-address"}, "email"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"locale": "english please"}, "locale"),
        ({"display_name": "x" * 201}, "display_name"),
        ({"role": "admin"}, "role"),
        ({"display_name": None}, "display_name"),
    ],
)
def test_invalid_user_fields_are_422(api, body, field):
    response = api.put("/v1/users/u-5", body)
    assert response.status_code == 422
    assert [e["field"] for e in response.get_json()["errors"]] == [field]
    assert _user("u-5") is None


def test_external_id_in_the_url_is_validated(api):
    response = api.put("/v1/users/" + "x" * 256, {})
    assert response.status_code == 422
    assert response.get_json()["errors"][0]["field"] == "external_id"


def test_delete_erases_the_user_and_everything_about_them(api, comment_type):
    api.put("/v1/users/gone", {"email": "Gone@Example.com"})
    user_id = _user("gone")["id"]
    api.post("/v1/notifications", send_body("gone"))
    PreferenceFactory(user_id=user_id, type="comment", channel="push", enabled=True)
    db.session.add(PushSubscription(user_id=user_id, endpoint="https://push.example/1", p256dh="k", auth="a"))
    db.session.add(EmailSuppression(address="gone@example.com", reason="bounce"))
    db.session.add(EmailSuppression(address="kept@example.com", reason="bounce"))
    api.post("/v1/users/gone/login-links")
    db.session.flush()
    response = api.delete("/v1/users/gone")
    assert response.status_code == 204 and response.data == b""
    assert _user("gone") is None
    for table in (
        "notifications",
        "notification_deliveries",
        "notification_preferences",
        "push_subscriptions",
        "login_links",
    ):
        assert count(table) == 0, table
    assert [r.address for r in db.session.scalars(sa.select(EmailSuppression))] == ["kept@example.com"]
    assert api.delete("/v1/users/gone").status_code == 404
