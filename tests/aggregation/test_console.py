"""The console's aggregation window on a type: set, cleared, validated, audited, CSRF-protected."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.models import NotificationType
from tests.console.conftest import audit_rows, operator  # noqa: F401 (fixtures)
from tests.factories import NotificationTypeFactory, UserFactory

FORM = {"key": "like", "label": "Likes", "default_in_app": "y", "priority": "default", "escalate_unless": "read"}


def window_of(key: str):
    db.session.expire_all()
    return db.session.get(NotificationType, key).aggregation_window


def test_set_show_and_clear_the_window_audited(client, csrf, operator, audit_rows):  # noqa: F811
    response = client.post("/console/types/new", headers=csrf(), data={**FORM, "aggregation_window": "300"})
    assert response.status_code == 302 and window_of("like") == 300
    assert audit_rows("type.create")[0].after["aggregation_window"] == 300
    assert "aggregates over 300 s" in client.get("/console/types").get_data(as_text=True)
    assert 'value="300"' in client.get("/console/types/like/edit").get_data(as_text=True)
    response = client.post("/console/types/like/edit", headers=csrf(), data={**FORM, "aggregation_window": ""})
    assert response.status_code == 302 and window_of("like") is None
    (entry,) = audit_rows("type.update")
    assert (entry.before["aggregation_window"], entry.after["aggregation_window"]) == (300, None)


@pytest.mark.parametrize("value", ["0", "-5", "86401", "soon"])
def test_a_bad_window_names_the_field_and_changes_nothing(client, csrf, operator, audit_rows, value):  # noqa: F811
    NotificationTypeFactory(type="like")
    response = client.post("/console/types/like/edit", headers=csrf(), data={**FORM, "aggregation_window": value})
    assert response.status_code == 422
    assert 'id="aggregation_window-error"' in response.get_data(as_text=True)
    assert window_of("like") is None and audit_rows() == []


def test_the_window_needs_csrf(client, operator):  # noqa: F811
    NotificationTypeFactory(type="like")
    response = client.post("/console/types/like/edit", data={**FORM, "aggregation_window": "60"})
    assert response.status_code in (400, 403) and window_of("like") is None


def test_a_member_cannot_set_the_window(client, csrf, login_as):
    NotificationTypeFactory(type="like")
    login_as(UserFactory(role="member"))
    response = client.post("/console/types/like/edit", headers=csrf(), data={**FORM, "aggregation_window": "60"})
    assert response.status_code in (302, 403, 404) and window_of("like") is None


def test_the_service_refuses_a_window_out_of_range():
    from app.notification_types import service
    from app.refusal import Refused

    with pytest.raises(Refused, match="aggregation window"):
        service.create_type(None, key="big", label="Big", timing=service.Timing(aggregation_window=86401))
