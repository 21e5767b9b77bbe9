"""The operator's default e-mail frequency per type (console → Types): set, shown, audited, validated."""

from __future__ import annotations

from app.extensions import db
from app.models import NotificationType
from tests.console.conftest import audit_rows, operator  # noqa: F401 - fixtures
from tests.factories import UserFactory
from tests.support.html import attrs

FORM = {"label": "Likes", "default_in_app": "y", "default_email": "y", "priority": "low", "key": "like"}


def frequency(key: str) -> str:
    db.session.expire_all()
    return db.session.get(NotificationType, key).email_frequency


def test_new_types_mail_immediately_and_the_operator_picks_a_digest(client, csrf, operator, audit_rows):  # noqa: F811
    client.post("/console/types/new", headers=csrf(), data=FORM)
    assert frequency("like") == "immediate"

    response = client.post("/console/types/like/edit", headers=csrf(), data={**FORM, "email_frequency": "daily"})

    assert response.status_code == 302 and frequency("like") == "daily"
    (entry,) = audit_rows("type.update")
    assert (entry.before["email_frequency"], entry.after["email_frequency"]) == ("immediate", "daily")
    row = client.get("/console/types").get_data(as_text=True).split('id="type-like"')[1].split("</tr>")[0]
    assert "e-mail in the daily digest" in row
    page = client.get("/console/types/like/edit").get_data(as_text=True)
    assert attrs(page, "#email_frequency option[selected]", "value") == ["daily"]


def test_unknown_frequency_is_refused(client, csrf, operator):  # noqa: F811
    client.post("/console/types/new", headers=csrf(), data=FORM)
    response = client.post("/console/types/like/edit", headers=csrf(), data={**FORM, "email_frequency": "weekly"})
    assert response.status_code == 422 and frequency("like") == "immediate"


def test_members_cannot_set_defaults(client, csrf, login_as):
    login_as(UserFactory(role="member"))
    response = client.post("/console/types/new", headers=csrf(), data={**FORM, "email_frequency": "daily"})
    assert response.status_code in (403, 404)
    assert db.session.get(NotificationType, "like") is None
