"""Issue 28 item 1: the device registry through the API (PUT/GET/DELETE /v1/users/{id}/devices) and the feed."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.devices import service as devices
from app.extensions import db
from tests.api.conftest import count
from tests.factories import UserFactory
from tests.feed.test_feed_api import _feed, _key, _token

IOS = "0a1b2c3d" * 8  # 64 hex characters, as APNs hands them out today
ANDROID = "fcm-token:APA91bH" + "x" * 140


@pytest.fixture
def ann():
    return UserFactory(external_id="ann")


def _devices(api, user: str = "ann") -> list[dict]:
    response = api.get(f"/v1/users/{user}/devices")
    assert response.status_code == 200, response.get_json()
    return response.get_json()["devices"]


def test_put_registers_a_phone_with_what_the_app_says_about_itself(api, ann):
    body = {"platform": "ios", "token": IOS.upper(), "app_id": "com.example.app", "app_version": "4.2.0",
            "locale": "ja-JP", "timezone": "Asia/Tokyo"}  # fmt: skip
    response = api.put("/v1/users/ann/devices", body)
    assert response.status_code == 201, response.get_json()
    device = response.get_json()
    assert device["token"] == IOS  # APNs hex is case-insensitive: kept in lower case, one phone one row
    assert (device["platform"], device["app_id"], device["app_version"], device["locale"], device["timezone"]) == (
        "ios", "com.example.app", "4.2.0", "ja-JP", "Asia/Tokyo")  # fmt: skip
    assert device["enabled"] is True and device["invalidated_at"] is None and device["last_sent_at"] is None
    assert _devices(api) == [device]


def test_registering_again_refreshes_last_seen_keeps_left_out_fields_and_clears_an_invalidation(api, ann):
    first = api.put("/v1/users/ann/devices", {"platform": "android", "token": ANDROID, "app_version": "1.0"})
    db.session.execute(sa.text("UPDATE devices SET last_seen_at = now() - interval '3 days', invalidated_at = "
                               "now() - interval '1 day', invalid_reason = 'UNREGISTERED'"))  # fmt: skip
    again = api.put("/v1/users/ann/devices", {"platform": "android", "token": ANDROID, "locale": "en"})
    assert again.status_code == 200
    device = again.get_json()
    assert device["id"] == first.get_json()["id"] and device["app_version"] == "1.0" and device["locale"] == "en"
    assert device["invalidated_at"] is None and device["invalid_reason"] is None
    assert datetime.fromisoformat(device["last_seen_at"]) > datetime.now(UTC) - timedelta(minutes=1)


def test_a_token_registered_by_a_second_user_moves_to_them(api, ann):
    UserFactory(external_id="bob")
    api.put("/v1/users/ann/devices", {"platform": "ios", "token": IOS})
    response = api.put("/v1/users/bob/devices", {"platform": "ios", "token": IOS})
    assert response.status_code == 201
    assert _devices(api, "ann") == [] and [d["token"] for d in _devices(api, "bob")] == [IOS]


def test_the_same_token_on_the_other_platform_is_another_phone(api, ann):
    token = "ab" * 32  # hex is a valid FCM token shape too
    api.put("/v1/users/ann/devices", {"platform": "ios", "token": token})
    api.put("/v1/users/ann/devices", {"platform": "android", "token": token})
    assert sorted(d["platform"] for d in _devices(api)) == ["android", "ios"]


def test_a_full_user_loses_the_refused_phones_first_then_the_least_recently_seen(api, ann, app, monkeypatch):
    monkeypatch.setitem(app.config, "DEVICES_MAX_PER_USER", 3)
    for i in range(3):
        api.put("/v1/users/ann/devices", {"platform": "android", "token": f"t{i}"})
    age = sa.text("UPDATE devices SET last_seen_at = now() - make_interval(days => :d) WHERE token = :t")
    for days, token in ((9, "t0"), (8, "t1"), (7, "t2")):
        db.session.execute(age, {"d": days, "t": token})
    db.session.execute(sa.text("UPDATE devices SET invalidated_at = now() WHERE token = 't2'"))  # seen last, dead
    api.put("/v1/users/ann/devices", {"platform": "android", "token": "t3"})
    assert sorted(d["token"] for d in _devices(api)) == ["t0", "t1", "t3"]
    api.put("/v1/users/ann/devices", {"platform": "android", "token": "t4"})
    assert sorted(d["token"] for d in _devices(api)) == ["t1", "t3", "t4"]  # t0 was the least recently seen


def test_delete_forgets_the_phone_and_404s_for_a_token_the_user_does_not_have(api, ann):
    UserFactory(external_id="bob")
    api.put("/v1/users/ann/devices", {"platform": "ios", "token": IOS})
    assert api.delete(f"/v1/users/bob/devices/{IOS}").status_code == 404  # another user's phone stays
    assert api.delete(f"/v1/users/ann/devices/{IOS.upper()}").status_code == 204
    assert _devices(api) == [] and count("devices") == 0
    assert api.delete(f"/v1/users/ann/devices/{IOS}").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"platform": "windows", "token": "x"}, "platform"),
        ({"platform": "ios", "token": "not-hex"}, "token"),
        ({"platform": "ios", "token": "abc"}, "token"),  # odd length
        ({"platform": "android", "token": "has space"}, "token"),
        ({"platform": "android", "token": "x" * 4097}, "token"),
        ({"platform": "android", "token": "t", "timezone": "Mars/Olympus"}, "timezone"),
        ({"platform": "android", "token": "t", "locale": "english please"}, "locale"),
        ({"platform": "android", "token": "t", "app_id": "../etc"}, "app_id"),
        ({"platform": "android", "token": "t", "app_version": "1\n2"}, "app_version"),
        ({"platform": "android", "token": "t", "extra": 1}, "extra"),
    ],
)
def test_bad_input_is_a_422_naming_the_field_and_changes_nothing(api, ann, body, field):
    response = api.put("/v1/users/ann/devices", body)
    assert response.status_code == 422, response.get_json()
    assert [e["field"] for e in response.get_json()["errors"]] == [field]
    assert count("devices") == 0


def test_unknown_users_and_operators_have_no_devices(api):
    UserFactory(external_id="op", role="operator")
    assert api.put("/v1/users/nobody/devices", {"platform": "ios", "token": IOS}).status_code == 404
    assert api.put("/v1/users/op/devices", {"platform": "ios", "token": IOS}).status_code == 403
    assert api.get("/v1/users/nobody/devices").status_code == 404


def test_scopes_users_write_changes_users_read_lists(client, ann):
    reader = _key(client, "users:read")
    writer = _key(client, "users:write")
    assert reader.put("/v1/users/ann/devices", {"platform": "ios", "token": IOS}).status_code == 403
    assert writer.put("/v1/users/ann/devices", {"platform": "ios", "token": IOS}).status_code == 201
    assert writer.get("/v1/users/ann/devices").status_code == 403
    assert len(reader.get("/v1/users/ann/devices").get_json()["devices"]) == 1
    assert reader.delete(f"/v1/users/ann/devices/{IOS}").status_code == 403


def test_the_app_registers_and_forgets_its_phone_with_a_user_token(client, ann):
    token = _token(_key(client, "feed:issue"), "ann")
    response = _feed(client, token, "POST", "/devices", json={"platform": "android", "token": ANDROID})
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["token"] == ANDROID and count("devices", "user_id = :u", u=ann.id) == 1
    assert _feed(client, token, "DELETE", "/devices/other").status_code == 404
    assert _feed(client, token, "DELETE", f"/devices/{ANDROID}").status_code == 204
    assert count("devices") == 0
    assert _feed(client, None, "POST", "/devices", json={"platform": "android", "token": "t"}).status_code == 401


def test_the_feed_cannot_forget_another_members_phone(client, ann):
    bob = UserFactory(external_id="bob")
    devices.register(bob.id, {"platform": "android", "token": ANDROID})
    token = _token(_key(client, "feed:issue"), "ann")
    assert _feed(client, token, "DELETE", f"/devices/{ANDROID}").status_code == 404
    assert count("devices", "user_id = :u", u=bob.id) == 1


def test_turning_a_phone_off_survives_a_new_registration(api, ann):
    device_id = api.put("/v1/users/ann/devices", {"platform": "ios", "token": IOS}).get_json()["id"]
    assert devices.set_enabled(ann.id, device_id, False)
    assert api.put("/v1/users/ann/devices", {"platform": "ios", "token": IOS}).get_json()["enabled"] is False
    assert devices.set_enabled(ann.id, device_id, True)
    assert _devices(api)[0]["enabled"] is True


def test_an_apns_410_older_than_the_latest_registration_is_ignored(api, ann):
    api.put("/v1/users/ann/devices", {"platform": "ios", "token": IOS})
    before = (datetime.now(UTC) - timedelta(hours=1)).timestamp()
    devices.record_outcome(db.session, ann.id, [IOS], [(IOS, "Unregistered", before)])
    assert _devices(api)[0]["invalidated_at"] is None and _devices(api)[0]["last_sent_at"] is not None
    later = (datetime.now(UTC) + timedelta(seconds=5)).timestamp()
    devices.record_outcome(db.session, ann.id, [], [(IOS, "Unregistered", later)])
    assert _devices(api)[0]["invalid_reason"] == "Unregistered"


def test_erasing_the_user_erases_their_phones(api, ann):
    api.put("/v1/users/ann/devices", {"platform": "ios", "token": IOS})
    assert api.delete("/v1/users/ann").status_code == 204
    assert count("devices") == 0


@pytest.mark.committed
def test_two_users_registering_one_token_at_once_leave_it_with_one_of_them(app):
    """The advisory lock: concurrent registrations of one token (each on its own connection) never both keep it."""
    ids = [UserFactory(external_id=f"race-{i}").id for i in range(4)]
    db.session.commit()
    errors, start = [], threading.Barrier(len(ids))

    def register(user_id: int) -> None:
        try:
            with app.app_context():
                start.wait(5)
                devices.register(user_id, {"platform": "android", "token": "raced"})
                db.session.commit()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=register, args=(user_id,)) for user_id in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    holders = db.session.execute(sa.text("SELECT user_id FROM devices WHERE token = 'raced'")).scalars().all()
    assert errors == [] and len(holders) == 1 and holders[0] in ids
