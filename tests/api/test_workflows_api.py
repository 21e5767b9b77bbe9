"""GET/PUT /v1/workflows/<type>, POST …/publish, GET …/versions: drafts checked whole, versions, scopes, audit."""

from __future__ import annotations

import pytest

from app.api_keys.service import create_api_key, key_prefix
from app.extensions import db
from app.models import AuditEntry
from app.workflows import queries
from tests.api.conftest import Api, count, new_key, send_body

URL = "/v1/workflows/comment"
ESCALATE = [{"kind": "channel", "channel": "in_app"}, {"kind": "delay", "seconds": 600},
            {"kind": "channel", "channel": "email", "only_if": ["unseen"]}]  # fmt: skip


def audit(action: str) -> list[AuditEntry]:
    return db.session.query(AuditEntry).filter_by(action=action).order_by(AuditEntry.id).all()


def test_get_shows_the_published_steps_then_the_draft(api, comment_type):
    published = queries.published("comment")
    shown = api.get(URL)
    assert shown.status_code == 200
    body = shown.get_json()
    assert (body["type"], body["draft"], body["published_version"]) == ("comment", False, 1)
    assert body["steps"] == published.steps["steps"] and body["draft_updated_at"] is None

    assert api.put(URL, {"steps": ESCALATE}).status_code == 200
    body = api.get(URL).get_json()
    assert (body["draft"], body["steps"], body["published_version"]) == (True, ESCALATE, 1)
    assert body["draft_updated_at"]


def test_put_stores_a_draft_that_does_not_run_yet(api, comment_type):
    response = api.put(URL, {"steps": ESCALATE})

    assert response.status_code == 200
    assert response.get_json()["draft"] is True and response.get_json()["steps"] == ESCALATE
    assert queries.draft("comment").steps == {"steps": ESCALATE}
    assert queries.published("comment").version == 1  # new notifications still run version 1


def test_an_invalid_workflow_is_422_naming_every_step_and_field_and_nothing_is_stored(api, comment_type):
    steps = [
        {"kind": "channel", "channel": "in_app", "condition": "data.x > 1"},  # in-app has no condition
        {"kind": "delay", "seconds": 60, "local_time": "09:00"},  # two kinds of wait
        {"kind": "channel", "channel": "email", "condition": "data.amount >"},  # not CEL
        {"kind": "digest", "frequency": "daily", "only_if": ["unread", "unseen"]},
    ]
    response = api.put(URL, {"steps": steps})

    assert response.status_code == 422
    assert response.mimetype == "application/problem+json"
    errors = response.get_json()["errors"]
    where = {(e["step"], e["field"]) for e in errors}
    assert where == {(1, "steps.0.condition"), (2, "steps.1.seconds"), (3, "steps.2.condition"),
                     (4, "steps.3.only_if")}  # fmt: skip
    assert all(e["message"] for e in errors)
    assert queries.draft("comment") is None and audit("workflow.draft") == []


@pytest.mark.parametrize(
    ("step", "field"),
    [
        ({"kind": "channel", "channel": "email", "colour": "red"}, "steps.1.colour"),  # unknown field
        ({"kind": "teleport"}, "steps.1.kind"),
        ({"kind": "delay", "seconds": 0}, "steps.1.seconds"),
    ],
)
def test_a_step_the_schema_refuses_is_422_naming_its_field(api, comment_type, step, field):
    response = api.put(URL, {"steps": [{"kind": "channel", "channel": "in_app"}, step]})
    assert response.status_code == 422
    assert (2, field) in {(e.get("step"), e["field"]) for e in response.get_json()["errors"]}  # the step too
    assert queries.draft("comment") is None


def test_a_step_field_of_another_kind_is_422(api, comment_type):
    response = api.put(URL, {"steps": [{"kind": "channel", "channel": "in_app"},
                                       {"kind": "delay", "seconds": 60, "channel": "email"}]})  # fmt: skip
    assert response.status_code == 422
    [error] = [e for e in response.get_json()["errors"] if e["field"] == "steps.1.channel"]
    assert error["step"] == 2


def test_publish_makes_the_next_version_and_a_new_notification_runs_it(api, comment_type, recipient):
    api.put(URL, {"steps": ESCALATE})

    published = api.post(URL + "/publish", {"note": "escalate after ten minutes"})

    assert published.status_code == 201
    body = published.get_json()
    assert (body["version"], body["steps"], body["note"], body["restored_from"]) == (
        2, ESCALATE, "escalate after ten minutes", None)  # fmt: skip
    assert queries.published("comment").version == 2 and queries.draft("comment") is None
    sent = api.post("/v1/notifications", send_body(recipient.external_id)).get_json()["results"][0]
    shown = api.get(f"/v1/notifications/{sent['notification_id']}").get_json()
    assert shown["workflow"]["version"] == 2
    steps = shown["workflow"]["steps"]
    assert [(s["position"], s["kind"], s["channel"]) for s in steps] == [
        (1, "channel", "in_app"), (2, "delay", None), (3, "channel", "email")]  # fmt: skip


def test_publish_without_a_draft_is_409(api, comment_type):
    response = api.post(URL + "/publish", {"note": ""})
    assert response.status_code == 409
    assert queries.published("comment").version == 1


def test_versions_are_listed_newest_first(api, comment_type):
    api.put(URL, {"steps": ESCALATE})
    api.post(URL + "/publish", {"note": "second"})

    response = api.get(URL + "/versions")

    assert response.status_code == 200
    versions = response.get_json()["versions"]
    assert [(v["version"], v["note"]) for v in versions][0] == (2, "second")
    assert [v["version"] for v in versions] == [2, 1] and versions[0]["steps"] == ESCALATE


@pytest.mark.parametrize(
    ("scopes", "method", "path", "body"),
    [
        (["workflows:write"], "GET", URL, None),
        (["workflows:write"], "GET", URL + "/versions", None),
        (["workflows:read"], "PUT", URL, {"steps": ESCALATE}),
        (["workflows:read"], "POST", URL + "/publish", {"note": ""}),
        (["notifications:write"], "GET", URL, None),
    ],
)
def test_a_key_without_the_scope_is_403_and_changes_nothing(client, comment_type, scopes, method, path, body):
    limited = Api(client, create_api_key(None, "limited", scopes))

    response = limited.call(method, path, body)

    assert response.status_code == 403
    assert response.get_json()["scope"] in ("workflows:read", "workflows:write")
    assert queries.draft("comment") is None and queries.published("comment").version == 1


def test_the_read_scope_alone_reads(client, comment_type):
    reader = Api(client, create_api_key(None, "reader", ["workflows:read"]))
    assert reader.get(URL).status_code == 200 and reader.get(URL + "/versions").status_code == 200


@pytest.mark.parametrize("type_key", ["nosuchtype", "Comment", "comment%20x", "x", "comment-1", "a" * 70])
def test_an_unknown_or_malformed_type_is_404(api, comment_type, type_key):
    assert api.get(f"/v1/workflows/{type_key}").status_code == 404
    assert api.put(f"/v1/workflows/{type_key}", {"steps": ESCALATE}).status_code == 404
    assert api.post(f"/v1/workflows/{type_key}/publish", {"note": ""}).status_code == 404
    assert api.get(f"/v1/workflows/{type_key}/versions").status_code == 404
    assert count("workflow_drafts") == 0


def test_a_put_replayed_with_its_idempotency_key_returns_the_same_response(api, comment_type):
    key = new_key()
    first = api.put(URL, {"steps": ESCALATE}, idempotency_key=key)
    again = api.put(URL, {"steps": ESCALATE}, idempotency_key=key)

    assert first.status_code == again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json() == first.get_json()
    assert len(audit("workflow.draft")) == 1


def test_the_audit_log_names_the_api_key(client, comment_type):
    secret = create_api_key(None, "deploy bot", ["workflows:read", "workflows:write"])
    bot = Api(client, secret)

    bot.put(URL, {"steps": ESCALATE})
    assert queries.draft("comment").updated_by is None  # the key's id is no user's
    bot.post(URL + "/publish", {"note": "from the pipeline"})
    assert queries.published("comment").published_by is None

    label = f"api key deploy bot ({key_prefix(secret)})"
    [draft] = audit("workflow.draft")
    [publish] = [e for e in audit("workflow.publish") if e.target_id == "comment"]
    assert (draft.actor_label, draft.actor_id, draft.target_id) == (label, None, "comment")
    assert publish.actor_label == label and publish.after["version"] == 2
