"""Notification types: slug keys, rename only while unused, confirm before overriding users' choices."""

from __future__ import annotations

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
