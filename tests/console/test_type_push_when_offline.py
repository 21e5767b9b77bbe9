"""The console's push_when_offline flag per type (issue 30), audited and shown in the list."""

from __future__ import annotations

from tests.factories import NotificationTypeFactory


def test_an_operator_sets_the_flag_and_it_is_audited(client, csrf, operator, audit_rows):
    NotificationTypeFactory(type="reply", label="Replies")
    form = {"label": "Replies", "description": "", "default_in_app": "y", "priority": "default", "key": "reply"}
    response = client.post("/console/types/reply/edit", headers=csrf(), data={**form, "push_when_offline": "y"})
    assert response.status_code == 302
    (entry,) = audit_rows("type.update")
    assert (entry.before["push_when_offline"], entry.after["push_when_offline"]) == (False, True)
    assert "push only when offline" in client.get("/console/types").get_data(as_text=True)
