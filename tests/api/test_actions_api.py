"""POST /v1/notifications `actions`: validation, storage, and the product's answer (PATCH …/actions/<name>)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.actions import service
from app.extensions import db
from tests.api.conftest import send_body

APPROVE = {"label": "Approve", "labels": {"ja": "承認", "pt_BR": "Aprovar"}, "action": "approve"}
VIEW = {"label": "View order", "url": "/orders/42"}


def stored(notification_id: int):
    return db.session.execute(
        sa.text("SELECT actions FROM notifications WHERE id = :id"), {"id": notification_id}
    ).scalar()


def fields(response) -> dict:
    return {e["field"]: e["message"] for e in response.get_json()["errors"]}


def test_actions_are_stored_with_the_notification(api, comment_type, recipient):
    response = api.post("/v1/notifications", send_body(recipient.external_id, actions=[APPROVE, VIEW]))
    assert response.status_code == 202, response.get_json()
    (result,) = response.get_json()["results"]
    assert stored(result["notification_id"]) == [
        {"label": "Approve", "labels": {"ja": "承認", "pt-br": "Aprovar"}, "action": "approve"},
        {"label": "View order", "url": "/orders/42"},
    ]
    plain = api.post("/v1/notifications", send_body(recipient.external_id, dedupe_key="plain")).get_json()
    assert stored(plain["results"][0]["notification_id"]) is None


@pytest.mark.parametrize(
    ("actions", "field"),
    [
        ([APPROVE, VIEW, {"label": "Third", "action": "third"}], "actions"),  # at most two
        ([{"label": "Evil", "url": "https://evil.example/x"}], "actions.0.url"),  # same-site rule
        ([{"label": "Evil", "url": "//evil.example/x"}], "actions.0.url"),
        ([{"label": "x" * 41, "action": "approve"}], "actions.0.label"),  # label too long
        ([{"label": "Both", "action": "a", "url": "/a"}], "actions.0"),
        ([{"label": "None"}], "actions.0"),
        ([{"label": "Bad", "action": "Not A Slug"}], "actions.0.action"),
        ([{"label": "A", "action": "a"}, {"label": "B", "action": "a"}], "actions"),  # a name twice
        ([{"label": "A", "action": "a", "labels": {"ja": "x" * 41}}], "actions.0.labels.ja"),
    ],
)
def test_invalid_actions_are_422_and_write_nothing(api, comment_type, recipient, actions, field):
    response = api.post("/v1/notifications", send_body(recipient.external_id, actions=actions))
    assert response.status_code == 422, response.get_json()
    assert field in fields(response)
    assert db.session.execute(sa.text("SELECT count(*) FROM notifications WHERE user_id = :u"),
                              {"u": recipient.id}).scalar() == 0  # fmt: skip


def test_actions_need_a_notification_sent_now_to_recipients(api, comment_type, recipient):
    response = api.post(
        "/v1/notifications", send_body(recipient.external_id, actions=[APPROVE], send_at="2099-01-01T00:00:00Z")
    )
    assert response.status_code == 422 and "actions" in fields(response)


def test_the_product_answers_an_action(api, comment_type, recipient):
    sent = api.post("/v1/notifications", send_body(recipient.external_id, actions=[APPROVE, VIEW])).get_json()
    notification_id = sent["results"][0]["notification_id"]
    service.click(recipient.id, notification_id, "approve", "inbox")
    response = api.call("PATCH", f"/v1/notifications/{notification_id}/actions/approve", {"state": "Approved"})
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert (body["state"], body["via"], body["clicked_at"] is not None) == ("Approved", "inbox", True)
    shown = api.get(f"/v1/notifications/{notification_id}").get_json()["actions"]
    assert [(a["action"], a["state"], a["via"]) for a in shown] == [
        ("approve", "Approved", "inbox"),
        (None, None, None),
    ]
    assert shown[1]["url"] == "/orders/42" and shown[0]["labels"] == {"ja": "承認", "pt-br": "Aprovar"}
    # a link button, an unknown name, a bad name, an empty state
    assert api.call("PATCH", f"/v1/notifications/{notification_id}/actions/view", {"state": "x"}).status_code == 404
    assert api.call("PATCH", f"/v1/notifications/{notification_id}/actions/nope", {"state": "x"}).status_code == 404
    assert api.call("PATCH", f"/v1/notifications/{notification_id}/actions/A%20B", {"state": "x"}).status_code == 422
    assert api.call("PATCH", f"/v1/notifications/{notification_id}/actions/approve", {"state": ""}).status_code == 422


def test_another_key_cannot_answer(api, client, comment_type, recipient):
    from app.api_keys.service import create_api_key
    from tests.api.conftest import Api

    sent = api.post("/v1/notifications", send_body(recipient.external_id, actions=[APPROVE])).get_json()
    notification_id = sent["results"][0]["notification_id"]
    other = Api(client, create_api_key(None, "other", ["notifications:write"]))
    response = other.call("PATCH", f"/v1/notifications/{notification_id}/actions/approve", {"state": "Approved"})
    assert response.status_code == 404
    assert db.session.execute(sa.text("SELECT count(*) FROM notification_action_clicks")).scalar() == 0
