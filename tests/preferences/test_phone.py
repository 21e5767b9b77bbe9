"""The phone section of the preference screen over HTTP (issue 29): add, verify and remove a number, consent,
the limits, CSRF, and only ever the signed-in member's own row."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.notification_types.builtin import PHONE_VERIFICATION
from app.users import phone_verification as pv
from tests.factories import UserFactory
from tests.support.html import attrs, one, texts

NEW = "+819011112222"


@pytest.fixture(autouse=True)
def sms_configured(app, monkeypatch):
    """An installation with Twilio set up (the section shows only where SMS is configured); nothing is sent here."""
    settings = {"SMS_PROVIDER": "twilio", "TWILIO_ACCOUNT_SID": "AC" + "0" * 32, "TWILIO_AUTH_TOKEN": "t" * 32,
                "TWILIO_FROM": "+15005550006"}  # fmt: skip
    for name, value in settings.items():
        monkeypatch.setitem(app.config, name, value)


def _pending(user_id: int):
    return db.session.execute(sa.text("SELECT * FROM phone_verifications WHERE user_id = :u"), {"u": user_id}).first()


def _user(user_id: int):
    db.session.expire_all()
    return db.session.execute(sa.text("SELECT * FROM users WHERE id = :u"), {"u": user_id}).mappings().one()


def _code(app, user_id: int) -> str:
    return pv.code_for(app.config["SECRET_KEY"], bytes(_pending(user_id).seed))


def _send(client, headers, phone="090-1111-2222"):
    return client.post("/preferences/phone/code", data={"phone": phone}, headers=headers)


def test_the_section_shows_the_state_and_only_where_sms_is_configured(app, client, member, monkeypatch):
    html = client.get("/preferences").get_data(as_text=True)
    assert texts(html, "#phone-number") == ["No number yet"]
    assert attrs(html, "#phone-input", "autocomplete") == ["tel"]
    assert one(html, "#sms_opt_in").get("checked") is None
    assert "code-input" not in html  # no code in flight yet

    monkeypatch.setitem(app.config, "SMS_PROVIDER", "")
    assert 'id="phone"' not in client.get("/preferences").get_data(as_text=True)
    assert _send(client, {}).status_code in (400, 404)


def test_a_national_number_gets_a_code_and_the_form_to_type_it(client, member, htmx):
    response = _send(client, htmx())
    html = response.get_data(as_text=True)

    assert response.status_code == 200
    assert texts(html, ".alert--success") == ["We sent a code to +81••••••2222. It expires in 10 minutes."]
    assert _pending(member.id).phone == NEW
    assert attrs(html, "#code-input", "autocomplete") == ["one-time-code"]
    assert "5 tries left" in texts(html, "#code-help")[0]
    assert _user(member.id)["phone"] is None  # not the member's until verified


@pytest.mark.parametrize(
    "typed, message",
    [
        ("hello", "A phone number has no letters"),
        ("090-1234", "The number is too short"),
        ("", "No phone number was given."),
        ("+81 90 1234 5678 ext. 9", "A phone number has no letters"),
    ],
)
def test_a_bad_number_is_a_field_error_that_changes_nothing(client, member, htmx, typed, message):
    response = _send(client, htmx(), typed)
    html = response.get_data(as_text=True)

    assert response.status_code == 422
    assert one(html, "#phone-input")["aria-invalid"] == "true"
    assert message in texts(html, "#phone-error")[0]
    assert one(html, "#phone-input")["value"] == typed
    assert _pending(member.id) is None
    assert db.session.execute(sa.text("SELECT count(*) FROM notifications")).scalar() == 0


def test_a_bad_number_without_javascript_shows_the_page_again(client, member, csrf):
    response = _send(client, csrf(), "hello")
    assert response.status_code == 422
    assert texts(response.get_data(as_text=True), "h1") == ["Preferences"]


def test_without_javascript_a_send_comes_back_to_the_section(client, member, csrf):
    response = _send(client, csrf())
    assert response.status_code == 303 and response.headers["Location"].endswith("/preferences#phone")
    assert "code-input" in client.get("/preferences").get_data(as_text=True)


def test_the_right_code_verifies_and_a_wrong_one_says_how_many_tries_are_left(app, client, member, htmx):
    _send(client, htmx())
    wrong = str((int(_code(app, member.id)) + 1) % 10**6).zfill(6)

    response = client.post("/preferences/phone/verify", data={"code": wrong}, headers=htmx())
    assert response.status_code == 422
    assert texts(response.get_data(as_text=True), "#code-error") == ["That code is not right. 4 tries left."]

    response = client.post("/preferences/phone/verify", data={"code": _code(app, member.id)}, headers=htmx())
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert texts(html, ".alert--success") == ["Your number +81••••••2222 is verified."]
    assert texts(html, "#phone-number .tag") == ["Verified"]
    row = _user(member.id)
    assert row["phone"] == NEW and row["phone_verified_at"] is not None


def test_five_wrong_codes_need_a_new_one(app, client, member, htmx):
    _send(client, htmx())
    wrong = str((int(_code(app, member.id)) + 1) % 10**6).zfill(6)
    for _ in range(4):
        client.post("/preferences/phone/verify", data={"code": wrong}, headers=htmx())

    html = client.post("/preferences/phone/verify", data={"code": wrong}, headers=htmx()).get_data(as_text=True)
    assert "no tries are left. Ask for a new code." in texts(html, ".alert--error")[0]
    assert "code-input" not in html
    response = client.post("/preferences/phone/verify", data={"code": _code(app, member.id)}, headers=htmx())
    assert response.status_code == 422 and _user(member.id)["phone"] is None


def test_an_expired_code_says_so(app, client, member, htmx):
    _send(client, htmx())
    db.session.execute(sa.text("UPDATE phone_verifications SET expires_at = now() - interval '1 second'"))

    response = client.post("/preferences/phone/verify", data={"code": _code(app, member.id)}, headers=htmx())
    assert response.status_code == 422
    assert "That code has expired. Ask for a new code." in texts(response.get_data(as_text=True), ".alert--error")[0]


def test_too_many_codes_is_a_429_with_the_wait_and_sends_nothing(app, client, member, htmx, monkeypatch):
    monkeypatch.setitem(app.config, "PHONE_CODE_USER_RATE_LIMIT", "1 per hour")
    _send(client, htmx())

    response = _send(client, htmx(), "+819055556666")
    assert response.status_code == 429 and 0 < int(response.headers["Retry-After"]) <= 3600
    assert "Too many codes were asked for." in texts(response.get_data(as_text=True), "#phone-error")[0]
    assert _pending(member.id).phone == NEW


def test_consent_is_given_and_withdrawn_on_record(client, member, htmx):
    html = client.post("/preferences/phone/consent", data={"sms_opt_in": "on"}, headers=htmx()).get_data(as_text=True)
    assert texts(html, ".alert--success") == ["You will get text messages."]
    assert one(html, "#sms_opt_in").get("checked") is not None
    assert "your choice on this page" in texts(html, "#phone-consent")[0]

    client.post("/preferences/phone/consent", data={}, headers=htmx())  # the box unticked
    rows = db.session.execute(sa.text("SELECT opted_in, source FROM sms_consents WHERE user_id = :u ORDER BY id"),
                              {"u": member.id}).all()  # fmt: skip
    assert [tuple(r) for r in rows] == [(True, "member"), (False, "member")]
    assert _user(member.id)["sms_opt_in"] is False


def test_removing_the_number(client, member, htmx):
    db.session.execute(sa.text("UPDATE users SET phone = :p, phone_verified_at = now() WHERE id = :u"),
                       {"p": NEW, "u": member.id})  # fmt: skip
    html = client.post("/preferences/phone/remove", headers=htmx()).get_data(as_text=True)
    assert texts(html, ".alert--success") == ["Your number was removed."]
    assert _user(member.id)["phone"] is None


def test_a_refused_number_shows_why_escaped(client, member):
    db.session.execute(
        sa.text("UPDATE users SET phone = :p, phone_verified_at = now(), phone_invalidated_at = now(), "
                "phone_invalid_reason = :r WHERE id = :u"),
        {"p": NEW, "r": "21211 <script>alert(1)</script>", "u": member.id},
    )  # fmt: skip
    html = client.get("/preferences").get_data(as_text=True)
    assert texts(html, "#phone-number .tag") == ["Refused"]
    assert "<script>alert(1)</script>" not in html and "21211 &lt;script&gt;" in html


# --- doors --------------------------------------------------------------------------------------------------------

ROUTES = [
    ("/preferences/phone/code", {"phone": NEW}),
    ("/preferences/phone/verify", {"code": "123456"}),
    ("/preferences/phone/remove", {}),
    ("/preferences/phone/consent", {"sms_opt_in": "on"}),
]


@pytest.mark.parametrize("path, data", ROUTES)
def test_every_post_needs_the_csrf_token(client, member, path, data):
    db.session.execute(sa.text("UPDATE users SET phone = :p, phone_verified_at = now() WHERE id = :u"),
                       {"p": "+819099990000", "u": member.id})  # fmt: skip
    before = dict(_user(member.id))
    assert client.post(path, data=data, headers={"HX-Request": "true"}).status_code == 400
    assert dict(_user(member.id)) == before and _pending(member.id) is None


@pytest.mark.parametrize("path, data", ROUTES)
def test_every_post_needs_a_signed_in_member(client, path, data, csrf):
    response = client.post(path, data=data, headers=csrf())
    assert response.status_code in (302, 401)
    assert db.session.execute(sa.text("SELECT count(*) FROM phone_verifications")).scalar() == 0


def test_one_member_cannot_use_or_spend_anothers_code(app, client, member, htmx):
    other = UserFactory(phone="+819088887777", phone_verified_at=datetime.now(UTC), sms_opt_in=True)
    pv.send_code(other.id, NEW, "JP")
    their_code = _code(app, other.id)

    response = client.post("/preferences/phone/verify", data={"code": their_code}, headers=htmx())
    assert response.status_code == 422
    assert "There is no code to check." in texts(response.get_data(as_text=True), ".alert--error")[0]
    # Nothing of theirs moved: their code, their tries, their number and consent.
    assert _pending(other.id).tries_left == pv.CODE_TRIES
    client.post("/preferences/phone/remove", headers=htmx())
    client.post("/preferences/phone/consent", data={}, headers=htmx())
    row = _user(other.id)
    assert (row["phone"], row["sms_opt_in"]) == ("+819088887777", True) and _pending(other.id) is not None
    assert _user(member.id)["phone"] is None


def test_the_built_in_type_is_not_in_the_matrix(client, member, htmx):
    _send(client, htmx())
    html = client.get("/preferences").get_data(as_text=True)
    assert f"type-{PHONE_VERIFICATION}" not in attrs(html, ".pref-table tbody tr", "id")


def test_the_section_speaks_japanese(client, member, htmx):
    member.locale = "ja"
    db.session.flush()
    html = _send(client, htmx(), "hello").get_data(as_text=True)
    assert texts(html, "#phone-title") == ["ショートメッセージ（SMS）"]
    assert texts(html, "button[type=submit]")[-1] == "コードを送信"
