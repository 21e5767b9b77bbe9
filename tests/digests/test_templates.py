"""The digest template per locale: edit and preview in the console (sandboxed, sample user and items),
audited; real digests use the user's locale chain."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.models import DigestTemplate
from tests.console.conftest import audit_rows, operator  # noqa: F401 - fixtures
from tests.factories import UserFactory
from tests.support.html import one, texts

WORDING = {
    "subject": "{{ total }} unread for {{ user.name }}",
    "body_text": "{% for g in groups %}{{ g.label }}={{ g.count }};{% endfor %}",
    "body_html": "",
}


def test_editor_previews_with_a_sample_user_and_items(client, csrf, operator):  # noqa: F811
    html = client.get("/console/templates/digest/en").get_data(as_text=True)
    assert texts(html, "#preview-subject") == ["Your daily digest: 3 new notifications"]
    assert "Likes (2)" in texts(html, "#preview-text")[0] and "Comments (1)" in texts(html, "#preview-text")[0]
    assert one(html, "iframe.console-email-frame").has_attr("sandbox")

    fragment = client.post("/console/templates/digest/en/preview", headers=csrf(), data=WORDING).get_data(as_text=True)
    assert texts(fragment, "#preview-subject") == ["3 unread for Ada Lovelace"]
    assert "Likes=2;Comments=1;" in texts(fragment, "#preview-text")[0]


def test_save_is_audited_and_used_for_users_of_that_locale(app, client, csrf, operator, audit_rows):  # noqa: F811
    response = client.post("/console/templates/digest/ja", headers=csrf(), data=WORDING)
    assert response.status_code == 302
    assert db.session.get(DigestTemplate, "ja").subject == WORDING["subject"]
    (entry,) = audit_rows("template.save")
    assert entry.target_type == "digest_template" and entry.target_id == "ja"
    assert "ja" in client.get("/console/templates").get_data(as_text=True)


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'a' * 10**9 }}",  # a size limit
        "{{ ''.__class__.__mro__ }}",  # an escape attempt
        "{% for a in range(10**6) %}{% for b in range(10**6) %}{% endfor %}{% endfor %}",  # the time budget
        "{% if %}",  # a syntax error
    ],
)
def test_sandbox_limits_show_as_problems_and_refuse_the_save(client, csrf, operator, source):  # noqa: F811
    fragment = client.post("/console/templates/digest/en/preview", headers=csrf(), data={"body_text": source}).get_data(
        as_text=True
    )
    assert texts(fragment, ".console-problem")
    response = client.post("/console/templates/digest/en", headers=csrf(), data={"body_text": source})
    assert response.status_code == 422 and db.session.get(DigestTemplate, "en") is None


def test_members_cannot_open_or_save_it(client, csrf, login_as):
    login_as(UserFactory(role="member"))
    assert client.get("/console/templates/digest/en").status_code in (403, 404)
    assert client.post("/console/templates/digest/en", headers=csrf(), data=WORDING).status_code in (403, 404)
    assert db.session.get(DigestTemplate, "en") is None


def test_save_without_csrf_is_refused(client, operator):  # noqa: F811
    assert client.post("/console/templates/digest/en", data=WORDING).status_code == 400
    assert db.session.get(DigestTemplate, "en") is None
