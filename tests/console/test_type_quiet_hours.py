"""The console's bypass_quiet_hours flag per type (issue 29), audited; Hato's own type keeps its key and mandate."""

from __future__ import annotations

from app.extensions import db
from app.models import NotificationType
from app.notification_types.builtin import PHONE_VERIFICATION, ensure_phone_verification
from tests.factories import NotificationTypeFactory
from tests.support.html import one

FORM = {"label": "Sign-in code", "description": "", "default_in_app": "y", "priority": "high"}


def test_an_operator_marks_a_type_to_skip_quiet_hours_and_it_is_audited(client, csrf, operator, audit_rows):
    NotificationTypeFactory(type="sign_in", label="Sign-in code", priority="high")
    form = client.get("/console/types/sign_in/edit").get_data(as_text=True)
    assert one(form, "#bypass_quiet_hours").get("checked") is None

    response = client.post("/console/types/sign_in/edit", headers=csrf(),
                           data={**FORM, "key": "sign_in", "bypass_quiet_hours": "y"})  # fmt: skip
    assert response.status_code == 302
    db.session.expire_all()
    assert db.session.get(NotificationType, "sign_in").bypass_quiet_hours is True
    (entry,) = audit_rows("type.update")
    assert (entry.before["bypass_quiet_hours"], entry.after["bypass_quiet_hours"]) == (False, True)
    assert "sent during quiet hours" in client.get("/console/types").get_data(as_text=True)

    client.post("/console/types/sign_in/edit", headers=csrf(), data={**FORM, "key": "sign_in"})  # unticked
    db.session.expire_all()
    assert db.session.get(NotificationType, "sign_in").bypass_quiet_hours is False
    assert audit_rows("type.update")[-1].after["bypass_quiet_hours"] is False


def test_a_new_type_with_the_flag_is_audited_with_it(client, csrf, operator, audit_rows):
    client.post("/console/types/new", headers=csrf(), data={**FORM, "key": "otp", "bypass_quiet_hours": "y"})
    assert db.session.get(NotificationType, "otp").bypass_quiet_hours is True
    assert audit_rows("type.create")[0].after["bypass_quiet_hours"] is True


def test_the_flag_needs_csrf(client, operator):
    NotificationTypeFactory(type="sign_in")
    response = client.post("/console/types/sign_in/edit", data={**FORM, "key": "sign_in", "bypass_quiet_hours": "y"})
    assert response.status_code == 400
    assert db.session.get(NotificationType, "sign_in").bypass_quiet_hours is False


def test_hatos_own_type_keeps_its_key_and_stays_mandatory(client, csrf, operator, audit_rows):
    ensure_phone_verification()
    data = {
        **FORM,
        "label": "Phone code",
        "default_in_app": "",
        "mandatory": "y",
        "bypass_quiet_hours": "y",
        "default_channels": "sms",
    }
    without_sms = {name: value for name, value in data.items() if name != "default_channels"}
    for attempt in ({**data, "key": "renamed"}, {**data, "key": PHONE_VERIFICATION, "mandatory": ""},
                    {**without_sms, "key": PHONE_VERIFICATION}):  # fmt: skip
        response = client.post(f"/console/types/{PHONE_VERIFICATION}/edit", headers=csrf(), data=attempt)
        assert response.status_code == 422
        assert "Hato sends this type itself" in response.get_data(as_text=True)
    assert audit_rows() == []
    # Its wording and flags may change.
    response = client.post(f"/console/types/{PHONE_VERIFICATION}/edit", headers=csrf(),
                           data={**data, "key": PHONE_VERIFICATION})  # fmt: skip
    assert response.status_code == 302
    db.session.expire_all()
    assert db.session.get(NotificationType, PHONE_VERIFICATION).label == "Phone code"


def test_the_built_in_key_cannot_be_taken_by_a_new_type(client, csrf, operator):
    response = client.post("/console/types/new", headers=csrf(), data={**FORM, "key": PHONE_VERIFICATION})
    assert response.status_code == 422 and "reserved" in response.get_data(as_text=True)
    assert db.session.get(NotificationType, PHONE_VERIFICATION) is None
