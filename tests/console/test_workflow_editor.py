"""The console's workflow editor: operators only, CSRF, add/remove/move, live problems at their fields, save,
publish (version N+1, audited), discard, and every text escaped in the page and the diagram."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.models import AuditEntry
from app.workflows import queries
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.workflow_form import editor_form as form

URL = "/console/types/reply/workflow"
IN_APP = {"kind": "channel", "channel": "in_app"}
PUSH = {"kind": "channel", "channel": "push", "read": "unread"}
WAIT = {"kind": "delay", "delay_by": "seconds", "delay_value": "60"}


def workflow_actions() -> list[str]:
    db.session.expire_all()
    return [e.action for e in db.session.query(AuditEntry).order_by(AuditEntry.id) if e.action.startswith("workflow")]


@pytest.fixture
def reply(app):
    return NotificationTypeFactory(type="reply", label="Replies", default_email=True)


def test_the_editor_shows_the_published_steps_and_its_diagram(client, operator, reply):
    page = client.get(URL).get_data(as_text=True)
    assert "Version 1 is published" in page and "No draft" in page
    assert 'name="steps-0-kind"' in page and 'name="steps-1-kind"' in page
    assert '<svg class="workflow-diagram"' in page and '<title id="workflow-diagram-title">' in page
    # The other pages of the workflow are linked from its header.
    assert f'href="{URL}/test"' in page and f'href="{URL}/history"' in page


def test_the_type_list_and_form_link_to_the_editor(client, operator, reply):
    assert f'href="{URL}"' in client.get("/console/types").get_data(as_text=True)
    assert f'href="{URL}"' in client.get("/console/types/reply/edit").get_data(as_text=True)


def test_members_cannot_open_or_post(client, csrf, login_as, reply):
    login_as(UserFactory(role="member"))
    assert client.get(URL).status_code == 403
    response = client.post(URL, headers=csrf(), data=form([IN_APP, PUSH], "publish"))
    assert response.status_code == 403 and queries.published("reply").version == 1


def test_anonymous_visitors_go_to_sign_in(client, reply):
    assert client.get(URL).status_code in (302, 401)


def test_a_post_without_csrf_is_refused(client, operator, reply):
    response = client.post(URL, data=form([IN_APP, PUSH], "publish"))
    assert response.status_code in (400, 403)
    assert queries.published("reply").version == 1 and queries.draft("reply") is None


def test_missing_type_is_404(client, operator):
    assert client.get("/console/types/nope/workflow").status_code == 404


def test_add_remove_and_move_steps(client, csrf, operator, reply):
    page = client.post(URL, headers=csrf(), data=form([IN_APP], "add", add_kind="delay")).get_data(as_text=True)
    assert 'name="steps-1-kind"' in page and 'name="steps-1-delay_value"' in page

    page = client.post(URL, headers=csrf(), data=form([IN_APP, WAIT, PUSH], "up-2")).get_data(as_text=True)
    assert page.index('id="step-2-channel"') < page.index('id="step-3-delay_value"')

    page = client.post(URL, headers=csrf(), data=form([IN_APP, PUSH, WAIT], "down-0")).get_data(as_text=True)
    assert page.index('id="step-1-channel"') < page.index('id="step-2-channel"')  # push first, in-app second
    assert 'value="push" selected' in page.split('id="step-1-channel"')[1].split("</select>")[0]

    page = client.post(URL, headers=csrf(), data=form([IN_APP, WAIT, PUSH], "remove-1")).get_data(as_text=True)
    assert 'name="steps-2-kind"' not in page and "delay_value" not in page
    # Nothing is stored by editing.
    assert queries.draft("reply") is None and workflow_actions() == []


def test_an_htmx_change_returns_only_the_list_and_the_diagram(client, csrf, operator, reply):
    headers = {**csrf(), "HX-Request": "true"}
    response = client.post(URL, headers=headers, data=form([IN_APP, PUSH], "add", add_kind="exit"))
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert 'id="workflow-body"' in page and "<html" not in page and "<svg" in page
    assert 'name="steps-2-kind"' in page


def test_an_invalid_condition_is_shown_at_its_field_and_nothing_is_stored(client, csrf, operator, reply):
    steps = [IN_APP, {**PUSH, "condition": "data.amount >"}]
    page = client.post(URL, headers=csrf(), data=form(steps)).get_data(as_text=True)
    field = page.split('id="step-2-condition"')[1].split(">")[0]
    assert 'aria-invalid="true"' in field and "step-2-condition-status" in field
    assert 'id="step-2-condition-error"' in page

    response = client.post(URL, headers=csrf(), data=form(steps, "save"))
    assert response.status_code == 422 and "Nothing was saved" in response.get_data(as_text=True)
    response = client.post(URL, headers=csrf(), data=form(steps, "publish"))
    assert response.status_code == 422
    assert queries.draft("reply") is None and queries.published("reply").version == 1 and workflow_actions() == []


def test_a_valid_condition_says_so(client, csrf, operator, reply):
    steps = [IN_APP, {**PUSH, "condition": "data.amount > 10000"}]
    page = client.post(URL, headers=csrf(), data=form(steps)).get_data(as_text=True)
    status = page.split('id="step-2-condition-status"')[1].split("</p>")[0]
    assert "valid" in status and "aria-invalid" not in page.split('id="step-2-condition"')[1].split(">")[0]


def test_a_document_problem_is_shown_at_the_top(client, csrf, operator, reply):
    page = client.post(URL, headers=csrf(), data=form([{"kind": "delay", "delay_by": "seconds", "delay_value": "5"}]))
    text = page.get_data(as_text=True)
    assert 'id="workflow-problems"' in text and "A workflow sends on at least one channel." in text


def test_save_a_draft_then_discard_it(client, csrf, operator, reply):
    response = client.post(URL, headers=csrf(), data=form([IN_APP, WAIT, PUSH], "save"))
    assert response.status_code == 302
    draft = queries.draft("reply")
    assert draft.steps["steps"][1] == {"kind": "delay", "seconds": 60}
    page = client.get(URL).get_data(as_text=True)
    assert "Draft saved" in page and "A draft is saved" in page and 'value="60"' in page
    assert queries.published("reply").version == 1  # a draft changes nothing that runs

    response = client.post(URL, headers=csrf(), data={"op": "discard"})
    assert response.status_code == 302 and queries.draft("reply") is None
    assert "Draft discarded." in client.get(URL).get_data(as_text=True)
    assert workflow_actions() == ["workflow.draft", "workflow.discard"]


def test_publish_makes_version_n_plus_one_and_is_audited(client, csrf, operator, reply):
    steps = [IN_APP, WAIT, {**PUSH, "wait_for_tab": "y"}]
    response = client.post(URL, headers=csrf(), data=form(steps, "publish", note="push after a minute"))
    assert response.status_code == 302
    db.session.expire_all()
    version = queries.published("reply")
    assert (version.version, version.note) == (2, "push after a minute")
    assert version.steps["steps"][2] == {"kind": "channel", "channel": "push", "only_if": ["unread"],
                                         "wait_for_tab": True}  # fmt: skip
    assert queries.draft("reply") is None
    assert workflow_actions() == ["workflow.draft", "workflow.publish"]
    page = client.get(URL).get_data(as_text=True)
    assert "Version 2 published" in page and "Version 2 is published" in page


def test_a_too_long_note_is_refused_and_nothing_is_stored(client, csrf, operator, reply):
    response = client.post(URL, headers=csrf(), data=form([IN_APP, PUSH], "publish", note="x" * 501))
    assert response.status_code == 422 and "at most 500 characters" in response.get_data(as_text=True)
    assert queries.draft("reply") is None and queries.published("reply").version == 1


def test_script_in_a_condition_or_a_note_is_escaped_in_the_page_and_the_svg(client, csrf, operator, reply):
    script = "<script>alert(1)</script>"
    steps = [IN_APP, {**PUSH, "condition": f'data.x == "{script}"'}]
    page = client.post(URL, headers=csrf(), data=form(steps, note=script)).get_data(as_text=True)
    assert script not in page and "&lt;script&gt;" in page
    assert client.post(URL, headers=csrf(), data=form(steps, "publish", note=script)).status_code == 302
    page = client.get(URL).get_data(as_text=True)
    assert script not in page and "&lt;script&gt;" in page.split('id="step-2-condition"')[1].split(">")[0]
    svg = page.split("<svg")[1].split("</svg>")[0]
    assert "<script" not in svg and "&lt;script&gt;" in svg
