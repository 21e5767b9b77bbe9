"""The aggregation window on a type, now its workflow's batch step (console workflow editor, issue 31): set,
cleared, validated, audited, CSRF-protected."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.models import NotificationType
from tests.console.conftest import audit_rows, operator  # noqa: F401 (fixtures)
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.workflow_form import editor_form

URL = "/console/types/like/workflow"
STEPS = [{"kind": "channel", "channel": "in_app"}, {"kind": "channel", "channel": "email"}]


def batched(window: str) -> list[dict]:
    return [{"kind": "batch", "window": window}, *STEPS]


def window_of(key: str):
    db.session.expire_all()
    return db.session.get(NotificationType, key).aggregation_window


def test_set_show_and_clear_the_window_audited(client, csrf, operator, audit_rows):  # noqa: F811
    NotificationTypeFactory(type="like", label="Likes")
    response = client.post(URL, headers=csrf(), data=editor_form(batched("300"), "publish"))
    assert response.status_code == 302 and window_of("like") == 300
    assert audit_rows("workflow.publish")[0].after["steps"]["steps"][0] == {"kind": "batch", "window": 300}
    assert "events within 5 min" in client.get("/console/types").get_data(as_text=True)
    assert 'value="300"' in client.get(URL).get_data(as_text=True)
    response = client.post(URL, headers=csrf(), data=editor_form(STEPS, "publish"))
    assert response.status_code == 302 and window_of("like") is None
    entry = audit_rows("workflow.publish")[-1]
    assert entry.before["steps"]["steps"][0] == {"kind": "batch", "window": 300}
    assert all(step["kind"] != "batch" for step in entry.after["steps"]["steps"])


@pytest.mark.parametrize("value", ["0", "-5", "86401", "soon"])
def test_a_bad_window_names_the_step_and_field_and_changes_nothing(client, csrf, operator, audit_rows, value):  # noqa: F811
    NotificationTypeFactory(type="like")
    for op in ("save", "publish"):
        response = client.post(URL, headers=csrf(), data=editor_form(batched(value), op))
        assert response.status_code == 422
        page = response.get_data(as_text=True)
        assert 'id="step-1-window-error"' in page and "A whole number from 1 to 86400." in page
    assert window_of("like") is None and audit_rows() == []


def test_the_window_needs_csrf(client, operator):  # noqa: F811
    NotificationTypeFactory(type="like")
    response = client.post(URL, data=editor_form(batched("60"), "publish"))
    assert response.status_code in (400, 403) and window_of("like") is None


def test_a_member_cannot_set_the_window(client, csrf, login_as):
    NotificationTypeFactory(type="like")
    login_as(UserFactory(role="member"))
    response = client.post(URL, headers=csrf(), data=editor_form(batched("60"), "publish"))
    assert response.status_code in (302, 403, 404) and window_of("like") is None


def test_the_service_refuses_a_window_out_of_range():
    from app.notification_types import service
    from app.refusal import Refused

    with pytest.raises(Refused, match="aggregation window"):
        service.create_type(None, key="big", label="Big", timing=service.Timing(aggregation_window=86401))
