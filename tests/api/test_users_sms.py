"""PUT /v1/users/<external_id> with a phone number and SMS consent (issue 29): E.164, 422s, consent history."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db


def _consents(external_id: str) -> list[tuple]:
    sql = sa.text(
        "SELECT c.phone, c.opted_in, c.source FROM sms_consents c JOIN users u ON u.id = c.user_id "
        "WHERE u.external_id = :x ORDER BY c.id"
    )
    return [tuple(row) for row in db.session.execute(sql, {"x": external_id})]


def _user(external_id: str):
    return (
        db.session.execute(sa.text("SELECT * FROM users WHERE external_id = :x"), {"x": external_id}).mappings().one()
    )


@pytest.mark.parametrize(
    "raw, e164",
    [
        ("+81 90-1234-5678", "+819012345678"),
        ("090-1234-5678", "+819012345678"),  # national: DEFAULT_PHONE_REGION (JP)
        ("+1 (415) 555-2671", "+14155552671"),
    ],
)
def test_a_phone_number_is_stored_as_e164_and_counts_as_verified(api, raw, e164):
    response = api.put("/v1/users/p-1", {"phone": raw})
    assert response.status_code == 201
    body = response.get_json()
    assert (body["phone"], body["phone_verified"], body["sms_opt_in"]) == (e164, True, False)
    row = _user("p-1")
    assert row["phone"] == e164 and row["phone_verified_at"] is not None


def test_a_national_number_follows_the_servers_region(api, app, monkeypatch):
    monkeypatch.setitem(app.config, "DEFAULT_PHONE_REGION", "US")
    assert api.put("/v1/users/p-2", {"phone": "(415) 555-2671"}).get_json()["phone"] == "+14155552671"


@pytest.mark.parametrize("raw", ["not a number", "+81 12", "+1 415 555 26719999", "12345"])
def test_an_invalid_number_is_a_422_naming_the_field_and_changes_nothing(api, raw):
    api.put("/v1/users/p-3", {"phone": "+819012345678"})
    response = api.put("/v1/users/p-3", {"phone": raw})
    assert response.status_code == 422
    (error,) = response.get_json()["errors"]
    assert error["field"] == "phone" and "+81 90 1234 5678" in error["message"]
    assert _user("p-3")["phone"] == "+819012345678"


def test_the_phone_message_is_in_the_readers_language(api):
    response = api.put("/v1/users/p-4", {"phone": "nope"}, headers={"Accept-Language": "ja"})
    (error,) = response.get_json()["errors"]
    assert error["field"] == "phone" and "携帯電話番号" in error["message"]


def test_null_removes_the_number_and_a_new_number_is_no_longer_refused(api):
    api.put("/v1/users/p-5", {"phone": "+819012345678"})
    db.session.execute(sa.text("UPDATE users SET phone_invalidated_at = now(), phone_invalid_reason = '21211' "
                               "WHERE external_id = 'p-5'"))  # fmt: skip
    db.session.commit()
    assert api.put("/v1/users/p-5", {"phone": "+819012345678"}).get_json()["phone_verified"] is False  # still refused
    assert api.put("/v1/users/p-5", {"phone": "+819087654321"}).get_json()["phone_verified"] is True
    body = api.put("/v1/users/p-5", {"phone": None}).get_json()
    assert (body["phone"], body["phone_verified"]) == (None, False)
    assert _user("p-5")["phone_verified_at"] is None


def test_consent_is_recorded_with_its_time_and_source_and_each_change_is_kept(api):
    api.put("/v1/users/p-6", {"phone": "+819012345678"})
    assert api.put("/v1/users/p-6", {"sms_opt_in": True}).get_json()["sms_opt_in"] is True
    row = _user("p-6")
    assert row["sms_opt_in_at"] is not None and row["sms_consent_source"] == "api"
    api.put("/v1/users/p-6", {"sms_opt_in": True})  # the same answer again is not a new change
    api.put("/v1/users/p-6", {"sms_opt_in": False})
    assert _consents("p-6") == [("+819012345678", True, "api"), ("+819012345678", False, "api")]


def test_sms_opt_in_must_be_a_boolean(api):
    response = api.put("/v1/users/p-7", {"sms_opt_in": "yes"})
    assert response.status_code == 422
    assert response.get_json()["errors"][0]["field"] == "sms_opt_in"


def test_a_new_member_created_without_consent_has_no_consent_record(api):
    api.put("/v1/users/p-8", {"phone": "+819012345678", "sms_opt_in": False})
    assert _consents("p-8") == []
    api.put("/v1/users/p-9", {"phone": "+819012345678", "sms_opt_in": True})
    assert _consents("p-9") == [("+819012345678", True, "api")]
