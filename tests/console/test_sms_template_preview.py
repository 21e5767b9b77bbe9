"""The SMS template editor: encoding, parts against the type's limit and the characters that forced UCS-2, live;
a wording over the limit is saved only on a second, confirmed submit; the type editor sets the limit."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.message_templates import service
from app.models import MessageTemplate, NotificationType
from tests.factories import NotificationTypeFactory
from tests.support.html import one, parse, texts

URL = "/console/templates/otp/sms/{locale}"
LONG_GSM = "Your code is {{ data.code }}. " + "x" * 170  # 2 GSM-7 parts with the sample


@pytest.fixture(autouse=True)
def otp_type():
    item = NotificationTypeFactory(type="otp", label="Sign-in code")
    item.sms_max_segments = 1
    db.session.flush()
    return item


def preview(client, csrf, body_text: str, locale: str = "en", **fields) -> str:
    response = client.post(
        URL.format(locale=locale) + "/preview",
        headers={**csrf(), "HX-Request": "true"},
        data={"body_text": body_text, **fields},
    )
    assert response.status_code == 200
    return response.get_data(as_text=True)


def count_templates() -> int:
    return db.session.scalar(sa.select(sa.func.count()).select_from(MessageTemplate))


def test_the_sms_editor_previews_live_with_the_gsm7_facts(client, csrf, operator):
    page = client.get(URL.format(locale="en")).get_data(as_text=True)
    field = one(page, "#template-form #body_text")
    assert field["hx-trigger"] == "keyup changed delay:400ms"
    assert field["hx-post"] == "/console/templates/otp/sms/en/preview"
    assert parse(page).select("#template-form #subject") == []  # an SMS has only its text
    # No template yet: the notification's title, body and absolute link, as the SMS channel sends them.
    assert one(page, "#preview-text").get_text().startswith("Reservation #310 was approved\nRoom 4B")
    assert "http" in one(page, "#preview-text").get_text()

    page = preview(client, csrf, "Hi {{ user.name }}, room {{ data.room }} is yours [ok]")
    assert texts(page, "#preview-text") == ["Hi Ada Lovelace, room 4B is yours [ok]"]
    assert texts(page, "#sms-encoding")[0].startswith("GSM-7 · up to 160 characters")
    characters = texts(page, "#sms-characters")[0]
    assert characters.startswith("38") and "counted as 40" in characters  # [ and ] take two septets each
    assert texts(page, "#sms-segments") == ["1 part of at most 1"]
    assert "nothing: every character is in the GSM-7 alphabet" in texts(page, "#sms-forcing")[0]
    assert parse(page).select("mark") == [] and parse(page).select("#sms-over-limit-preview") == []


def test_japanese_and_other_forcing_characters_are_marked_and_listed(client, csrf, operator):
    page = preview(client, csrf, "Code {{ data.room }}: 確認\u3000OK ✓")
    assert texts(page, "#sms-encoding")[0].startswith("UCS-2 · up to 70 characters")
    marked = [mark.get_text() for mark in parse(page).select("#preview-text .console-sms__forcing")]
    assert marked == ["確認\u3000", "✓"]  # in runs, as typed
    listed = [li.get_text(" ", strip=True) for li in parse(page).select("#sms-forcing li")]
    assert listed == ["確 U+78BA", "認 U+8A8D", "U+3000", "✓ U+2713"]  # an ideographic space shows its code

    page = preview(client, csrf, "あ" * 71)  # one past a single UCS-2 message: 2 parts of 67
    assert texts(page, "#sms-segments") == ["2 parts of at most 1"]
    assert one(page, "#sms-segments")["class"] == ["console-over"]
    assert texts(page, "#sms-encoding")[0].startswith("UCS-2 · 67 characters per part")
    warning = texts(page, "#sms-over-limit-preview")[0]
    assert "takes 2 parts (UCS-2) and the type allows 1" in warning
    meter = one(page, "meter")
    assert (meter["value"], meter["max"], meter["aria-labelledby"]) == ("2", "2", "sms-segments")


def test_the_preview_escapes_what_it_marks(client, csrf, operator):
    page = preview(client, csrf, "✓<img src=x onerror=alert(1)>{{ data.room }}")
    assert parse(page).select("#template-preview img, img") == []
    assert "&lt;img src=x onerror=alert(1)&gt;4B" in page
    evil = '{"user": {"name": "<script>alert(1)</script>"}, "notification": {}, "data": {}}'
    page = preview(client, csrf, "✓ {{ user.name }}", sample=evil)
    assert parse(page).select("script") == [] and "&lt;script&gt;" in page


def test_over_the_limit_warns_at_the_field_and_saves_only_once_confirmed(client, csrf, operator, audit_rows):
    url = URL.format(locale="en")
    response = client.post(url, headers=csrf(), data={"body_text": LONG_GSM})
    assert response.status_code == 409
    page = response.get_data(as_text=True)
    field = one(page, "#body_text")
    assert field["aria-invalid"] == "true" and "body_text-error" in field["aria-describedby"]
    assert "takes 2 parts (GSM-7) and the type allows 1" in texts(page, "#body_text-error")[0]
    assert one(page, "#sms-over-limit input#save_over_limit")["type"] == "checkbox"
    assert LONG_GSM in one(page, "#body_text").get_text()  # the operator's wording is kept in the form
    assert count_templates() == 0 and audit_rows() == []

    response = client.post(url, headers=csrf(), data={"body_text": LONG_GSM, "save_over_limit": "y"})
    assert response.status_code == 302
    template = db.session.scalars(sa.select(MessageTemplate)).one()
    assert (template.channel, template.body_text) == ("sms", LONG_GSM)
    (entry,) = audit_rows("template.save")
    assert "type allows 1" in entry.after["confirmed_warnings"][0]
    page = client.get(url).get_data(as_text=True)
    assert parse(page).select("#sms-over-limit") == []  # asked only on the refused submit


def test_within_the_limit_saves_at_once_and_shortening_needs_no_confirmation(client, csrf, operator, audit_rows):
    url = URL.format(locale="ja")
    assert client.post(url, headers=csrf(), data={"body_text": "あ" * 71}).status_code == 409
    response = client.post(url, headers=csrf(), data={"body_text": "認証コード: {{ data.room }}"})
    assert response.status_code == 302
    (entry,) = audit_rows("template.save")
    assert "confirmed_warnings" not in entry.after


def test_the_limit_follows_the_type(client, csrf, operator):
    db.session.get(NotificationType, "otp").sms_max_segments = 2
    db.session.flush()
    page = preview(client, csrf, LONG_GSM)
    assert texts(page, "#sms-segments") == ["2 parts of at most 2"] and "console-over" not in page
    assert client.post(URL.format(locale="en"), headers=csrf(), data={"body_text": LONG_GSM}).status_code == 302


def test_the_service_refuses_an_unconfirmed_warning(operator):
    with pytest.raises(service.NeedsConfirmation) as refused:
        service.save_template(operator, "otp", "sms", "en", problems=[], warnings=["too long"], body_text="x")
    assert refused.value.warnings == ["too long"] and count_templates() == 0


def test_saving_needs_csrf_and_an_operator(client, csrf, member):
    url = URL.format(locale="en")
    assert client.post(url, headers=csrf(), data={"body_text": "hi", "save_over_limit": "y"}).status_code == 403
    assert client.post(url + "/preview", headers=csrf(), data={"body_text": "hi"}).status_code == 403
    assert count_templates() == 0


def test_saving_without_csrf_changes_nothing(client, operator):
    response = client.post(URL.format(locale="en"), data={"body_text": LONG_GSM, "save_over_limit": "y"})
    assert response.status_code in (400, 403, 422)
    assert count_templates() == 0


def test_the_preview_speaks_japanese(client, csrf, operator):
    operator.locale = "ja"
    db.session.flush()
    page = preview(client, csrf, "あ" * 71)
    assert "GSM-7" not in texts(page, "#sms-encoding")[0]
    assert "Parts" not in page and "Forced UCS-2" not in page  # the labels are translated
    assert "type allows" not in page


# --- the type editor's limit ------------------------------------------------------------------------------

TYPE_FORM = {"key": "otp", "label": "Sign-in code", "default_in_app": "y", "priority": "high"}


def test_the_type_editor_sets_the_sms_limit_audited(client, csrf, operator, audit_rows):
    page = client.get("/console/types/otp/edit").get_data(as_text=True)
    assert one(page, "#sms_max_segments")["value"] == "1"
    response = client.post("/console/types/otp/edit", headers=csrf(), data={**TYPE_FORM, "sms_max_segments": "4"})
    assert response.status_code == 302
    assert db.session.get(NotificationType, "otp").sms_max_segments == 4
    (entry,) = audit_rows("type.update")
    assert (entry.before["sms_max_segments"], entry.after["sms_max_segments"]) == (1, 4)
    # Left empty (an older form, an API-less script): the limit stays.
    assert client.post("/console/types/otp/edit", headers=csrf(), data=TYPE_FORM).status_code == 302
    assert db.session.get(NotificationType, "otp").sms_max_segments == 4


@pytest.mark.parametrize("value", ["0", "11", "-1", "two"])
def test_the_type_editor_refuses_a_limit_out_of_range(client, csrf, operator, audit_rows, value):
    response = client.post("/console/types/otp/edit", headers=csrf(), data={**TYPE_FORM, "sms_max_segments": value})
    assert response.status_code == 422
    assert texts(response.get_data(as_text=True), "#sms_max_segments-error")
    assert db.session.get(NotificationType, "otp").sms_max_segments == 1 and audit_rows() == []


def test_a_new_type_takes_the_limit_and_a_rename_keeps_it(client, csrf, operator):
    data = {**TYPE_FORM, "key": "login_code", "sms_max_segments": "2"}
    assert client.post("/console/types/new", headers=csrf(), data=data).status_code == 302
    assert db.session.get(NotificationType, "login_code").sms_max_segments == 2
    data = {**data, "key": "sign_in_code"}
    assert client.post("/console/types/login_code/edit", headers=csrf(), data=data).status_code == 302
    db.session.expire_all()
    assert db.session.get(NotificationType, "sign_in_code").sms_max_segments == 2
