"""Notification types: slug keys, rename only while unused, confirm before overriding users' choices."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import MessageTemplate, NotificationPreference, NotificationType
from app.preferences.queries import resolve
from tests.factories import NotificationFactory, NotificationTypeFactory, PreferenceFactory, UserFactory

FORM = {
    "label": "Room booked",
    "description": "A booking went through.",
    "default_in_app": "y",
    "default_email": "y",
    "priority": "default",
}


def test_create_a_type(client, csrf, operator, audit_rows):
    response = client.post("/console/types/new", headers=csrf(), data={**FORM, "key": "room_booked"})
    assert response.status_code == 302
    item = db.session.get(NotificationType, "room_booked")
    assert (item.label, item.default_in_app, item.default_email, item.default_push, item.mandatory) == (
        "Room booked",
        True,
        True,
        False,
        False,
    )
    (entry,) = audit_rows("type.create")
    assert entry.target_id == "room_booked" and entry.after["default_email"] is True
    assert "room_booked" in client.get("/console/types").get_data(as_text=True)


def test_keys_must_be_slugs_and_unique(client, csrf, operator, audit_rows):
    NotificationTypeFactory(type="comment")
    for key in ["Comment", "1abc", "a", "has-dash", "x" * 64, "spaced key", "comment"]:
        response = client.post("/console/types/new", headers=csrf(), data={**FORM, "key": key})
        assert response.status_code == 422, key
    assert "already exists" in response.get_data(as_text=True)
    assert db.session.scalar(sa.select(sa.func.count()).select_from(NotificationType)) == 1
    assert audit_rows() == []


def test_edit_defaults_and_priority(client, csrf, operator, audit_rows):
    NotificationTypeFactory(type="comment", label="Comment")
    response = client.post(
        "/console/types/comment/edit",
        headers=csrf(),
        data={**FORM, "key": "comment", "label": "Comments", "default_push": "y", "priority": "low"},
    )
    assert response.status_code == 302
    item = db.session.get(NotificationType, "comment")
    assert (item.label, item.default_push, item.priority) == ("Comments", True, "low")
    (entry,) = audit_rows("type.update")
    assert entry.before["label"] == "Comment" and entry.after["label"] == "Comments"


def test_rename_an_unused_type_moves_its_templates_and_preferences(client, csrf, operator, audit_rows):
    NotificationTypeFactory(type="draft_type", label="Draft")
    user = UserFactory()
    PreferenceFactory(user_id=user.id, type="draft_type", channel="email", enabled=True)
    db.session.add(MessageTemplate(type="draft_type", channel="email", locale="en", subject="Hi"))
    db.session.flush()
    form = client.get("/console/types/draft_type/edit").get_data(as_text=True)
    assert "can be renamed until the first notification uses it" in form
    response = client.post(
        "/console/types/draft_type/edit", headers=csrf(), data={**FORM, "key": "final_type", "label": "Final"}
    )
    assert response.status_code == 302
    db.session.expire_all()
    assert db.session.get(NotificationType, "draft_type") is None
    assert db.session.get(NotificationType, "final_type").label == "Final"
    assert db.session.scalars(sa.select(MessageTemplate.type)).all() == ["final_type"]
    assert db.session.scalars(sa.select(NotificationPreference.type)).all() == ["final_type"]
    (entry,) = audit_rows("type.update")
    assert (entry.target_id, entry.before["type"], entry.after["type"]) == ("final_type", "draft_type", "final_type")


def test_a_used_key_cannot_be_renamed(client, csrf, operator, audit_rows):
    NotificationTypeFactory(type="comment")
    NotificationFactory(type="comment")
    form = client.get("/console/types/comment/edit").get_data(as_text=True)
    assert "readonly" in form and "can no longer be renamed" in form
    response = client.post("/console/types/comment/edit", headers=csrf(), data={**FORM, "key": "comments"})
    assert response.status_code == 422
    assert "Notifications already use this key" in response.get_data(as_text=True)
    assert db.session.get(NotificationType, "comments") is None
    assert audit_rows() == []


def test_going_mandatory_shows_the_overridden_users_first(client, csrf, operator, audit_rows):
    NotificationTypeFactory(type="security", default_in_app=True, default_email=True)
    deviating = [UserFactory() for _ in range(3)]
    for user in deviating[:2]:
        PreferenceFactory(user_id=user.id, type="security", channel="email", enabled=False)
    # A stored row equal to the default overrides nothing.
    PreferenceFactory(user_id=deviating[2].id, type="security", channel="in_app", enabled=True)
    data = {**FORM, "key": "security", "label": "Security", "mandatory": "y"}

    response = client.post("/console/types/security/edit", headers=csrf(), data=data)
    assert response.status_code == 409
    page = response.get_data(as_text=True)
    assert "2 users have changed this type" in page and "Make mandatory, override 2 users" in page
    assert 'name="confirmed" value="y"' in page
    db.session.expire_all()
    assert db.session.get(NotificationType, "security").mandatory is False
    assert audit_rows() == []

    response = client.post("/console/types/security/edit", headers=csrf(), data={**data, "confirmed": "y"})
    assert response.status_code == 302
    db.session.expire_all()
    assert db.session.get(NotificationType, "security").mandatory is True
    # The resolving SQL now ignores their opt-outs.
    cells = {(c.user_id, c.channel): c.send for c in resolve([u.id for u in deviating[:2]], "security")}
    assert all(cells[(u.id, "email")] for u in deviating[:2])
    assert audit_rows("type.update")[0].after["mandatory"] is True


def test_going_mandatory_without_deviations_needs_no_confirmation(client, csrf, operator):
    NotificationTypeFactory(type="billing")
    response = client.post(
        "/console/types/billing/edit", headers=csrf(), data={**FORM, "key": "billing", "mandatory": "y"}
    )
    assert response.status_code == 302
    assert db.session.get(NotificationType, "billing").mandatory is True


def test_missing_type_is_404(client, operator):
    assert client.get("/console/types/nope/edit").status_code == 404


# --- timing and routing (issue 15) ---------------------------------------------------------------------

TIMING = {"escalate_after": "300", "escalate_unless": "seen", "skip_when_online": "y", "cap_count": "5",
          "cap_window": "3600"}  # fmt: skip


def timing_of(key):
    db.session.expire_all()
    item = db.session.get(NotificationType, key)
    return (item.escalate_after, item.escalate_unless, item.skip_when_online, item.cap_count, item.cap_window)


def test_new_types_keep_sending_at_once(client, csrf, operator):
    client.post("/console/types/new", headers=csrf(), data={**FORM, "key": "plain"})
    assert timing_of("plain") == (None, "read", False, None, None)
    row = client.get("/console/types").get_data(as_text=True).split('id="type-plain"')[1].split("</tr>")[0]
    assert "At once" in row


def test_set_and_clear_timing_audited(client, csrf, operator, audit_rows):
    response = client.post("/console/types/new", headers=csrf(), data={**FORM, **TIMING, "key": "chat"})
    assert response.status_code == 302
    assert timing_of("chat") == (300, "seen", True, 5, 3600)
    assert audit_rows("type.create")[0].after["cap_window"] == 3600
    row = client.get("/console/types").get_data(as_text=True).split('id="type-chat"')[1].split("</tr>")[0]
    assert "escalates after 300 s if unseen" in row and "skipped while online" in row
    assert "at most 5 per 3,600 s" in row

    page = client.get("/console/types/chat/edit").get_data(as_text=True)
    assert 'name="escalate_after" type="number" value="300"' in page or 'value="300"' in page

    # What a browser posts when the operator empties the fields and unticks the box.
    cleared = {"escalate_after": "", "escalate_unless": "read", "cap_count": "", "cap_window": ""}
    response = client.post("/console/types/chat/edit", headers=csrf(), data={**FORM, **cleared, "key": "chat"})
    assert response.status_code == 302
    assert timing_of("chat") == (None, "read", False, None, None)
    (entry,) = audit_rows("type.update")
    assert (entry.before["escalate_after"], entry.after["escalate_after"]) == (300, None)
    assert (entry.before["skip_when_online"], entry.after["skip_when_online"]) == (True, False)
    assert (entry.before["cap_count"], entry.after["cap_count"]) == (5, None)


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"escalate_after": "0"}, "escalate_after", "Number must be between 1 and 2592000."),
        ({"escalate_after": "soon"}, "escalate_after", "Not a valid integer value."),
        ({"escalate_after": "60", "escalate_unless": "clicked"}, "escalate_unless", "Not a valid choice."),
        ({"cap_count": "5"}, "cap_window", "Give both the number and the window, or leave both empty."),
        ({"cap_window": "60"}, "cap_window", "Give both the number and the window, or leave both empty."),
        ({"cap_count": "0", "cap_window": "60"}, "cap_count", "Number must be between 1 and 10000."),
        ({"cap_count": "3", "cap_window": "-5"}, "cap_window", "Number must be between 1 and 2592000."),
    ],
)
def test_timing_validation_names_the_field(client, csrf, operator, audit_rows, fields, field, message):
    NotificationTypeFactory(type="chat")
    response = client.post("/console/types/chat/edit", headers=csrf(), data={**FORM, "key": "chat", **fields})
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    assert f'id="{field}-error"' in page and message in page
    assert timing_of("chat") == (None, "read", False, None, None)
    assert audit_rows() == []


def test_service_refuses_half_a_cap():
    from app.notification_types import service
    from app.refusal import Refused

    with pytest.raises(Refused, match="both its number and its window"):
        service.create_type(None, key="half", label="Half", timing=service.Timing(cap_count=3))


def test_rename_keeps_timing(client, csrf, operator):
    client.post("/console/types/new", headers=csrf(), data={**FORM, **TIMING, "key": "chat"})
    response = client.post("/console/types/chat/edit", headers=csrf(), data={**FORM, **TIMING, "key": "chat_message"})
    assert response.status_code == 302
    assert timing_of("chat_message") == (300, "seen", True, 5, 3600)


def test_timing_edit_needs_csrf(client, operator):
    NotificationTypeFactory(type="chat")
    response = client.post("/console/types/chat/edit", data={**FORM, **TIMING, "key": "chat"})
    assert response.status_code in (400, 403)
    assert timing_of("chat") == (None, "read", False, None, None)


def test_the_channel_order_and_mode_are_edited_in_the_console(client, csrf, operator, audit_rows):
    page = client.get("/console/types/new").get_data(as_text=True)
    assert 'name="channels-0"' in page and 'name="channels-1"' in page and 'name="channel_mode"' in page

    data = {**FORM, "key": "reply", "channels-0": "push", "channels-1": "email", "channel_mode": "first"}
    assert client.post("/console/types/new", headers=csrf(), data=data).status_code == 302

    db.session.expire_all()
    item = db.session.get(NotificationType, "reply")
    assert (item.channels, item.channel_mode) == (["push", "email"], "first")
    edit = client.get("/console/types/reply/edit").get_data(as_text=True)
    assert '<option selected value="push">' in edit.replace('value="push" selected', 'selected value="push"')


def test_no_order_means_every_channel_and_a_repeated_channel_is_refused(client, csrf, operator):
    client.post("/console/types/new", headers=csrf(), data={**FORM, "key": "plain_order"})
    db.session.expire_all()
    item = db.session.get(NotificationType, "plain_order")
    # No order: its first workflow version sends on every channel, in the registry's order, as steps (issue 31)
    assert (item.channels, item.channel_mode) == (["email", "push", "sms", "chat"], "all")

    data = {**FORM, "key": "twice", "channels-0": "email", "channels-1": "email"}
    response = client.post("/console/types/new", headers=csrf(), data=data)
    assert response.status_code == 422 and "Choose each channel once" in response.get_data(as_text=True)
    assert db.session.get(NotificationType, "twice") is None
