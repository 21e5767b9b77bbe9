"""The push_when_offline flag per type (issue 30), now a push step's "only if no open tab showed it" in the
workflow editor (issue 31): audited and shown in the list."""

from __future__ import annotations

from app.extensions import db
from app.models import NotificationType
from tests.factories import NotificationTypeFactory
from tests.support.workflow_form import editor_form


def test_an_operator_sets_the_flag_and_it_is_audited(client, csrf, operator, audit_rows):
    NotificationTypeFactory(type="reply", label="Replies")
    steps = [{"kind": "channel", "channel": "in_app"}, {"kind": "channel", "channel": "push", "wait_for_tab": "y"}]
    response = client.post("/console/types/reply/workflow", headers=csrf(), data=editor_form(steps, "publish"))
    assert response.status_code == 302
    (entry,) = audit_rows("workflow.publish")
    assert entry.before["steps"]["steps"] != entry.after["steps"]["steps"]
    assert entry.after["steps"]["steps"][1] == {"kind": "channel", "channel": "push", "wait_for_tab": True}
    db.session.expire_all()
    assert db.session.get(NotificationType, "reply").push_when_offline is True
    assert "if no open tab showed it" in client.get("/console/types").get_data(as_text=True)


def test_only_a_push_step_waits_for_the_tab(client, csrf, operator, audit_rows):
    NotificationTypeFactory(type="reply", label="Replies")
    page = client.get("/console/types/reply/workflow").get_data(as_text=True)
    # The box is drawn for push steps only.
    assert page.count('-wait_for_tab" value="y"') == page.count('value="push" selected') == 1
