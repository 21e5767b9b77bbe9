"""Notification types: slug keys, rename only while unused, confirm before overriding users' choices."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import MessageTemplate, NotificationPreference, NotificationType
from app.preferences.queries import resolve
from tests.factories import NotificationFactory, NotificationTypeFactory, PreferenceFactory, UserFactory
from tests.support.workflow_form import editor_form

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


# --- timing and routing (issue 15), now the type's workflow (issue 31): edited in the workflow editor -----------

# What the older TIMING fields said (escalate after 300 s unless seen, skip while online, at most 5 per hour), as
# the editor's steps.
TIMING = [
    {"kind": "throttle", "count": "5", "window": "3600"},
    {"kind": "channel", "channel": "in_app"},
    {"kind": "delay", "delay_by": "seconds", "delay_value": "300"},
    {"kind": "channel", "channel": "email", "read": "unseen", "offline": "y"},
    {"kind": "channel", "channel": "push", "read": "unseen", "offline": "y"},
]
AT_ONCE = [{"kind": "channel", "channel": "in_app"}, {"kind": "channel", "channel": "email"},
           {"kind": "channel", "channel": "push"}]  # fmt: skip


def timing_of(key):
    db.session.expire_all()
    item = db.session.get(NotificationType, key)
    return (item.escalate_after, item.escalate_unless, item.skip_when_online, item.cap_count, item.cap_window)


def publish(client, csrf, key, steps, **extra):
    return client.post(f"/console/types/{key}/workflow", headers=csrf(), data=editor_form(steps, "publish", **extra))


def test_new_types_keep_sending_at_once(client, csrf, operator):
    client.post("/console/types/new", headers=csrf(), data={**FORM, "key": "plain"})
    assert timing_of("plain") == (None, "read", False, None, None)
    row = client.get("/console/types").get_data(as_text=True).split('id="type-plain"')[1].split("</tr>")[0]
    # Its version 1: the inbox, then every channel at once, no wait and no rule.
    assert "v1" in row and "/console/types/plain/workflow" in row
    assert " → " in row and "if unread" not in row and " s " not in row


def test_set_and_clear_timing_audited(client, csrf, operator, audit_rows):
    client.post("/console/types/new", headers=csrf(), data={**FORM, "key": "chat"})
    response = publish(client, csrf, "chat", TIMING)
    assert response.status_code == 302
    assert timing_of("chat") == (300, "seen", True, 5, 3600)
    (entry,) = audit_rows("workflow.publish")
    assert entry.after["version"] == 2 and entry.after["steps"]["steps"][0] == {"kind": "throttle", "count": 5,
                                                                                 "window": 3600}  # fmt: skip
    row = client.get("/console/types").get_data(as_text=True).split('id="type-chat"')[1].split("</tr>")[0]
    assert "5 min" in row and "if unseen" in row and "if offline" in row and "at most 5 per 1 h" in row

    page = client.get("/console/types/chat/workflow").get_data(as_text=True)
    assert 'value="300"' in page and 'value="3600"' in page

    # The operator takes the wait, the rules and the throttle out again.
    assert publish(client, csrf, "chat", AT_ONCE).status_code == 302
    assert timing_of("chat") == (None, "read", False, None, None)
    entry = audit_rows("workflow.publish")[-1]
    assert (entry.before["version"], entry.after["version"]) == (2, 3)
    assert entry.before["steps"]["steps"][2] == {"kind": "delay", "seconds": 300}
    assert {"kind": "delay", "seconds": 300} not in entry.after["steps"]["steps"]


@pytest.mark.parametrize(
    "step, n, field, message",
    [
        ({"kind": "delay", "delay_by": "seconds", "delay_value": "0"}, 2, "delay_value", "A whole number from 1 to"),
        ({"kind": "delay", "delay_by": "seconds", "delay_value": "soon"}, 2, "delay_value", "A whole number from 1"),
        ({"kind": "channel", "channel": "fax"}, 2, "channel", "Choose one of"),
        ({"kind": "throttle", "count": "5"}, 2, "window", "Give the window in seconds."),
        ({"kind": "throttle", "window": "60"}, 2, "count", "Give how many messages the window allows."),
        ({"kind": "throttle", "count": "0", "window": "60"}, 2, "count", "A whole number from 1 to 10000."),
        ({"kind": "throttle", "count": "3", "window": "-5"}, 2, "window", "A whole number from 1 to 2592000."),
    ],
)
def test_timing_validation_names_the_field(client, csrf, operator, audit_rows, step, n, field, message):
    NotificationTypeFactory(type="chat")
    steps = [{"kind": "channel", "channel": "in_app"}, step, {"kind": "channel", "channel": "email"}]
    response = publish(client, csrf, "chat", steps)
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    assert f'id="step-{n}-{field}-error"' in page and message in page
    assert timing_of("chat") == (None, "read", False, None, None)
    assert audit_rows() == []


def test_service_refuses_half_a_cap():
    from app.notification_types import service
    from app.refusal import Refused

    with pytest.raises(Refused, match="both its number and its window"):
        service.create_type(None, key="half", label="Half", timing=service.Timing(cap_count=3))


def test_rename_keeps_timing(client, csrf, operator):
    client.post("/console/types/new", headers=csrf(), data={**FORM, "key": "chat"})
    publish(client, csrf, "chat", TIMING)
    response = client.post("/console/types/chat/edit", headers=csrf(), data={**FORM, "key": "chat_message"})
    assert response.status_code == 302
    assert timing_of("chat_message") == (300, "seen", True, 5, 3600)
    from app.workflows import queries as workflows

    assert workflows.published("chat_message").version == 2  # the type form's save publishes nothing


def test_timing_edit_needs_csrf(client, operator):
    NotificationTypeFactory(type="chat")
    response = client.post("/console/types/chat/workflow", data=editor_form(TIMING, "publish"))
    assert response.status_code in (400, 403)
    assert timing_of("chat") == (None, "read", False, None, None)


def test_the_channel_order_and_mode_are_edited_in_the_console(client, csrf, operator, audit_rows):
    page = client.get("/console/types/new").get_data(as_text=True)
    assert 'name="channels-0"' not in page and 'name="channel_mode"' in page  # the order: the workflow's steps

    data = {**FORM, "key": "reply", "channel_mode": "first"}
    assert client.post("/console/types/new", headers=csrf(), data=data).status_code == 302
    steps = [{"kind": "channel", "channel": "in_app"}, {"kind": "channel", "channel": "push"},
             {"kind": "channel", "channel": "email"}]  # fmt: skip
    assert publish(client, csrf, "reply", steps).status_code == 302

    db.session.expire_all()
    item = db.session.get(NotificationType, "reply")
    assert (item.channels, item.channel_mode) == (["push", "email"], "first")
    edit = client.get("/console/types/reply/edit").get_data(as_text=True)
    assert (
        'checked id="channel_mode-1"' in edit
        or 'value="first" checked' in edit
        or ("checked" in edit.split('value="first"')[0].rsplit("<input", 1)[1])
    )
    assert "/console/types/reply/workflow" in edit and "Delivery steps: edit the workflow" in edit
    page = client.get("/console/types/reply/workflow").get_data(as_text=True)
    assert page.index('value="push" selected') < page.index('value="email" selected')

    # Saving the type form keeps the order and the mode it shows.
    data = {**FORM, "key": "reply", "channel_mode": "all"}
    assert client.post("/console/types/reply/edit", headers=csrf(), data=data).status_code == 302
    db.session.expire_all()
    item = db.session.get(NotificationType, "reply")
    assert (item.channels, item.channel_mode) == (["push", "email"], "all")


def test_no_order_means_every_channel_and_a_repeated_channel_is_refused(client, csrf, operator):
    client.post("/console/types/new", headers=csrf(), data={**FORM, "key": "plain_order"})
    db.session.expire_all()
    item = db.session.get(NotificationType, "plain_order")
    # No order: its first workflow version sends on every channel, in the registry's order, as steps (issue 31)
    assert (item.channels, item.channel_mode) == (["email", "push", "sms", "chat"], "all")

    twice = [{"kind": "channel", "channel": "in_app"}, {"kind": "channel", "channel": "email"},
             {"kind": "channel", "channel": "email"}]  # fmt: skip
    response = publish(client, csrf, "plain_order", twice)
    page = response.get_data(as_text=True)
    assert response.status_code == 422 and 'id="step-3-channel-error"' in page and "each channel once" in page
    db.session.expire_all()
    assert db.session.get(NotificationType, "plain_order").channels == ["email", "push", "sms", "chat"]
