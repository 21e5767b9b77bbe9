"""The workflow's history page: versions newest first with their diffs, and rollback (asked first, audited)."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.workflows import queries, service
from tests.factories import NotificationTypeFactory
from tests.support.html import one, parse, texts

URL = "/console/types/payment/workflow/history"
ESCALATE = {"steps": [{"kind": "channel", "channel": "in_app"}, {"kind": "delay", "seconds": 600},
                      {"kind": "channel", "channel": "email", "only_if": ["unread"]}]}  # fmt: skip


@pytest.fixture
def versions(app, operator):
    """payment: version 1 from its columns, version 2 escalating by e-mail (published by the operator)."""
    NotificationTypeFactory(type="payment", label="Payment", default_email=True)
    service.save_draft(operator, "payment", ESCALATE)
    service.publish(operator, "payment", note="escalate <b>after</b> 10 min")
    db.session.flush()


def _rollback(client, csrf, version: int, **data):
    return client.post(f"/console/types/payment/workflow/rollback/{version}", data=data, headers=csrf())


def test_members_get_403_and_visitors_sign_in(client, app, member):
    NotificationTypeFactory(type="payment")
    assert client.get(URL).status_code == 403
    assert client.post("/console/types/payment/workflow/rollback/1").status_code in (400, 403)


def test_each_version_newest_first_with_who_when_note_and_the_current_one_marked(client, versions):
    page = client.get(URL)
    assert page.status_code == 200
    items = parse(page.text).select("#versions > li")
    assert [li["id"] for li in items] == ["version-2", "version-1"]
    assert items[0].get("aria-current") == "true" and items[1].get("aria-current") is None
    assert "in force" in items[0].get_text()
    assert "olivia@example.com" in one(page.text, "#version-2 .wf-version__meta").get_text()
    assert "—" in one(page.text, "#version-1 .wf-version__meta").get_text()  # from the columns: no one
    assert one(page.text, "#version-2 .wf-version__note").get_text() == "escalate <b>after</b> 10 min"
    assert "<b>after</b>" not in page.text  # the note is escaped
    # Only old versions can be rolled back to.
    assert not parse(page.text).select("#version-2 form")
    assert one(page.text, "#version-1 form")["action"] == "/console/types/payment/workflow/rollback/1"


def test_the_diff_shows_the_change_marked_for_screen_readers_too(client, versions):
    page = client.get(URL)
    added = texts(page.text, "#diff-2 ins")
    assert any("seconds: 600" in line for line in added)
    assert all(line.startswith("added:") for line in added)  # the words, not only the colour
    heading = one(page.text, "#version-2 h3").get_text()
    assert (
        heading
        == f"Changes from version 1 (lines added: {len(added)}, removed: {len(texts(page.text, '#diff-2 del'))})"
    )
    assert "The first version" in one(page.text, "#version-1").get_text()
    assert "kind: delay" in one(page.text, "#version-2 .wf-yaml").get_text()


def test_rollback_asks_first_then_publishes_the_old_steps_as_a_new_version(client, csrf, versions, audit_rows):
    asked = _rollback(client, csrf, 1)
    assert asked.status_code == 200
    assert "Roll back to version 1?" in one(asked.text, "h1").get_text()
    assert any("seconds: 600" in line for line in texts(asked.text, "#rollback-diff del"))
    assert queries.published("payment").version == 2  # nothing changed yet
    assert one(asked.text, "input[name=confirmed]")["value"] == "yes"

    done = _rollback(client, csrf, 1, confirmed="yes")
    assert done.status_code == 302 and done.headers["Location"].endswith(URL)
    current = queries.published("payment")
    assert (current.version, current.restored_from) == (3, 1)
    assert current.steps == queries.version("payment", 1).steps
    entry = audit_rows("workflow.publish")[-1]
    assert entry.after["version"] == 3 and entry.after["restored_from"] == 1
    page = client.get(URL)
    assert "Version 3 published: it restores version 1." in one(page.text, ".alert--success").get_text()
    assert "restores version 1" in one(page.text, "#version-3").get_text()


def test_a_rollback_to_an_unknown_version_is_a_clear_error(client, csrf, versions, audit_rows):
    for data in ({}, {"confirmed": "yes"}):
        refused = _rollback(client, csrf, 9, **data)
        assert refused.status_code == 302
        page = client.get(URL)
        assert "Version 9 of this workflow does not exist." in one(page.text, ".alert--error").get_text()
    assert queries.published("payment").version == 2
    assert len(audit_rows("workflow.publish")) == 1


def test_a_rollback_needs_its_csrf_token(client, versions):
    refused = client.post("/console/types/payment/workflow/rollback/1", data={"confirmed": "yes"})
    assert refused.status_code == 400
    assert queries.published("payment").version == 2


def test_an_unknown_type_is_404(client, operator):
    assert client.get("/console/types/nope/workflow/history").status_code == 404
