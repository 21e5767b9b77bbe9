"""The operator's default e-mail frequency per type, now the workflow's digest step (console workflow editor,
issue 31): set, shown, audited, validated."""

from __future__ import annotations

from app.extensions import db
from app.models import NotificationType
from tests.console.conftest import audit_rows, operator  # noqa: F401 - fixtures
from tests.factories import UserFactory
from tests.support.html import attrs
from tests.support.workflow_form import editor_form

FORM = {"label": "Likes", "default_in_app": "y", "default_email": "y", "priority": "low", "key": "like"}
URL = "/console/types/like/workflow"


def digest(frequency: str) -> list[dict]:
    return [{"kind": "channel", "channel": "in_app"}, {"kind": "digest", "frequency": frequency}]


def frequency(key: str) -> str:
    db.session.expire_all()
    return db.session.get(NotificationType, key).email_frequency


def test_new_types_mail_immediately_and_the_operator_picks_a_digest(client, csrf, operator, audit_rows):  # noqa: F811
    client.post("/console/types/new", headers=csrf(), data=FORM)
    assert frequency("like") == "immediate"

    response = client.post(URL, headers=csrf(), data=editor_form(digest("daily"), "publish"))

    assert response.status_code == 302 and frequency("like") == "daily"
    (entry,) = audit_rows("workflow.publish")
    assert entry.after["steps"]["steps"][1] == {"kind": "digest", "frequency": "daily"}
    assert all(step["kind"] != "digest" for step in entry.before["steps"]["steps"])
    row = client.get("/console/types").get_data(as_text=True).split('id="type-like"')[1].split("</tr>")[0]
    assert "Digest daily" in row
    page = client.get(URL).get_data(as_text=True)
    assert attrs(page, "#step-2-frequency option[selected]", "value") == ["daily"]


def test_unknown_frequency_is_refused(client, csrf, operator):  # noqa: F811
    client.post("/console/types/new", headers=csrf(), data=FORM)
    response = client.post(URL, headers=csrf(), data=editor_form(digest("weekly"), "publish"))
    assert response.status_code == 422 and 'id="step-2-frequency-error"' in response.get_data(as_text=True)
    assert frequency("like") == "immediate"


def test_members_cannot_set_defaults(client, csrf, login_as):
    login_as(UserFactory(role="member"))
    response = client.post("/console/types/new", headers=csrf(), data=FORM)
    assert response.status_code in (403, 404)
    assert db.session.get(NotificationType, "like") is None
    response = client.post(URL, headers=csrf(), data=editor_form(digest("daily"), "publish"))
    assert response.status_code in (403, 404)
