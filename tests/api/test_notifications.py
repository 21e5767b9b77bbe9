"""POST /v1/notifications and GET /v1/notifications/<id>: rows, deliveries, queues, badge events, errors."""

from __future__ import annotations

import io
import json
import time

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.queueing import get_queue, take_coalesced
from tests.api.conftest import count, send_body
from tests.factories import NotificationTypeFactory, PreferenceFactory, UserFactory
from tests.support.redis_watch import RedisWatch


def test_one_recipient_gets_a_row_and_an_email_delivery(api, comment_type, recipient):
    response = api.post(
        "/v1/notifications", send_body(recipient.external_id, link="/posts/7", data={"post": 7, "tags": ["a"]})
    )
    assert response.status_code == 202
    body = response.get_json()
    assert body["created"] == 1 and body["existing"] == 0 and body["priority"] == "default"
    (result,) = body["results"]
    assert result["recipient"] == recipient.external_id and result["status"] == "created"
    row = (
        db.session.execute(sa.text("SELECT * FROM notifications WHERE id = :id"), {"id": result["notification_id"]})
        .mappings()
        .one()
    )
    assert (row["user_id"], row["title"], row["link_path"], row["data"]) == (
        recipient.id,
        "New comment",
        "/posts/7",
        {"post": 7, "tags": ["a"]},
    )
    assert row["in_app"] and row["read_at"] is None
    deliveries = db.session.execute(
        sa.text("SELECT channel, status FROM notification_deliveries WHERE notification_id = :id"), {"id": row["id"]}
    ).all()
    assert deliveries == [("email", "pending")]


def test_same_dedupe_key_again_is_existing_not_an_error(api, comment_type, recipient):
    first = api.post("/v1/notifications", send_body(recipient.external_id, dedupe_key="comment:1")).get_json()
    again = api.post(
        "/v1/notifications", send_body(recipient.external_id, dedupe_key="comment:1", title="Edited title")
    )
    assert again.status_code == 202
    assert again.get_json()["results"][0] == {**first["results"][0], "status": "existing"}
    assert count("notifications", "user_id = :u", u=recipient.id) == 1
    assert count("notification_deliveries") == 1


def test_default_dedupe_key_makes_a_retried_request_a_repeat(api, comment_type, recipient):
    first = api.post("/v1/notifications", send_body(recipient.external_id)).get_json()
    second = api.post("/v1/notifications", send_body(recipient.external_id)).get_json()
    other = api.post("/v1/notifications", send_body(recipient.external_id, title="Another")).get_json()
    assert first["dedupe_key"].startswith("auto:") and second["dedupe_key"] == first["dedupe_key"]
    assert second["results"][0]["status"] == "existing"
    assert other["results"][0]["status"] == "created"


def test_many_recipients_in_one_request_keep_their_order_and_repeats_collapse(api, comment_type):
    users = UserFactory.create_batch(5)
    ids = [u.external_id for u in users]
    response = api.post("/v1/notifications", send_body(*ids, ids[0]))
    assert response.status_code == 202
    assert [r["recipient"] for r in response.get_json()["results"]] == ids
    assert count("notifications") == 5


def test_single_recipient_field_is_accepted(api, comment_type, recipient):
    body = {"type": "comment", "recipient": recipient.external_id, "title": "Hi"}
    assert api.post("/v1/notifications", body).status_code == 202


def test_unknown_recipients_are_listed_and_nothing_is_written(api, comment_type, recipient):
    response = api.post("/v1/notifications", send_body(recipient.external_id, "ghost-1", "ghost-2"))
    assert response.status_code == 422
    assert response.mimetype == "application/problem+json"
    problem = response.get_json()
    assert problem["unknown_recipients"] == ["ghost-1", "ghost-2"]
    assert {"field": "recipients", "message": problem["errors"][0]["message"]} in problem["errors"]
    assert count("notifications") == 0 and count("notification_deliveries") == 0


def test_unknown_type_is_422_naming_the_field(api, recipient):
    response = api.post("/v1/notifications", send_body(recipient.external_id, type="no_such_type"))
    assert response.status_code == 422
    assert [e["field"] for e in response.get_json()["errors"]] == ["type"]
    assert count("notifications") == 0


@pytest.mark.parametrize(
    "link", ["https://evil.example/x", "//evil.example/x", "/\\evil", "orders/1", "javascript:alert(1)", "/a b"]
)
def test_link_must_be_a_relative_path(api, comment_type, recipient, link):
    response = api.post("/v1/notifications", send_body(recipient.external_id, link=link))
    assert response.status_code == 422
    assert response.get_json()["errors"] == [
        {"field": "link", "message": "must be a relative path on this site, such as /orders/42"}
    ]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"type": "comment", "recipients": ["x"]}, "title"),
        ({"type": "comment", "title": "t"}, "recipients"),
        ({"type": "comment", "title": "t", "recipient": "x", "recipients": ["x"]}, "recipients"),
        ({"type": "comment", "title": "t", "recipients": []}, "recipients"),
        ({"type": "comment", "title": "t", "recipients": ["x"] * 1001}, "recipients"),
        ({"type": "comment", "title": "t", "recipients": ["x"], "extra": 1}, "extra"),
        ({"type": "comment", "title": "a\x00b", "recipients": ["x"]}, "title"),
        ({"type": "comment", "title": "t", "recipients": ["x"], "data": {"k": "\x00"}}, "data.k"),
        ({"type": "comment", "title": "t", "recipients": ["x"], "data": []}, "data"),
    ],
)
def test_invalid_fields_are_422_with_the_failing_field(api, body, field):
    response = api.post("/v1/notifications", body)
    assert response.status_code == 422
    assert field in [e["field"] for e in response.get_json()["errors"]]


def test_malformed_json_is_400(api):
    response = api.post("/v1/notifications", data=b'{"type": ', headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.get_json()["detail"].startswith("The body is not valid JSON")


def test_non_finite_numbers_are_rejected(api, comment_type, recipient):
    raw = json.dumps(send_body(recipient.external_id, data={"x": float("nan")}))
    response = api.post("/v1/notifications", data=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 422


def test_wrong_content_type_is_415(api):
    response = api.post("/v1/notifications", data="type=comment", headers={"Content-Type": "text/plain"})
    assert response.status_code == 415
    assert response.mimetype == "application/problem+json"


def test_body_over_the_limit_is_413_before_reading(api, app, monkeypatch):
    monkeypatch.setitem(app.config, "API_MAX_BODY_BYTES", 100)
    response = api.post("/v1/notifications", send_body("x" * 200))
    assert response.status_code == 413


def test_chunked_body_over_the_limit_is_413(api, app, monkeypatch):
    monkeypatch.setitem(app.config, "API_MAX_BODY_BYTES", 100)
    stream = io.BytesIO(b'{"type": "comment", "title": "' + b"x" * 500 + b'"}')
    response = api.post(
        "/v1/notifications",
        input_stream=stream,
        environ_overrides={"wsgi.input_terminated": True},
        headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
    )
    assert response.status_code == 413


def test_preferences_and_mandatory_types_shape_the_deliveries(api, recipient):
    NotificationTypeFactory(type="digest", default_email=True, default_push=True)
    NotificationTypeFactory(type="security", default_email=True, mandatory=True, priority="high")
    PreferenceFactory(user_id=recipient.id, type="digest", channel="email", enabled=False)
    PreferenceFactory(user_id=recipient.id, type="security", channel="email", enabled=False)
    api.post("/v1/notifications", send_body(recipient.external_id, type="digest"))
    api.post("/v1/notifications", send_body(recipient.external_id, type="security"))
    rows = db.session.execute(
        sa.text(
            "SELECT n.type, d.channel, d.status, d.skip_reason FROM notification_deliveries d "
            "JOIN notifications n ON n.id = d.notification_id ORDER BY n.type, d.channel"
        )
    ).all()
    assert rows == [("digest", "push", "skipped", "no_push_subscription"), ("security", "email", "pending", None)]


def test_in_app_off_row_anchors_deliveries_but_is_born_read(api, comment_type, recipient):
    PreferenceFactory(user_id=recipient.id, type="comment", channel="in_app", enabled=False)
    result = api.post("/v1/notifications", send_body(recipient.external_id)).get_json()["results"][0]
    shown = api.get(f"/v1/notifications/{result['notification_id']}").get_json()
    assert shown["in_app"] is False and shown["read_at"] is not None
    assert [d["status"] for d in shown["deliveries"]] == ["pending"]


def test_deliveries_go_to_the_types_priority_queue(api, recipient):
    NotificationTypeFactory(type="otp", default_email=True, priority="high")
    queue = get_queue("high")
    before = queue.count
    api.post("/v1/notifications", send_body(recipient.external_id, type="otp"))
    assert queue.count == before + 1
    job = queue.jobs[-1]  # live deliveries are coalesced: one drain job for the queue's e-mail list
    assert job.func_name == "jobs.delivery.drain_deliveries" and job.args == ["high", "email"]
    assert len(take_coalesced("high", "email", 10)) == 1


def test_badge_event_is_published_for_visible_new_rows(api, app, comment_type, recipient):
    watch = RedisWatch(users=[recipient.id])  # a node holding the recipient's tab
    try:
        before = time.time()
        body = api.post("/v1/notifications", send_body(recipient.external_id, title="Your order shipped")).get_json()
        message = watch.next_message()
    finally:
        watch.close()
    notification_id = body["results"][0]["notification_id"]
    assert message["users"] == [recipient.id] and message["toast"] == {"title": "Your order shipped"}
    assert message["n"] == {str(recipient.id): [notification_id]}  # the tab's ack will name it
    assert before <= message["t"] <= time.time()  # the 202's time, where the ack histogram starts


def test_no_badge_event_when_the_row_is_hidden_or_already_there(api, app, comment_type, recipient, monkeypatch):
    published = []
    monkeypatch.setattr("app.live.publish.route_badge", lambda ids, *args: published.append(list(ids)))
    api.post("/v1/notifications", send_body(recipient.external_id, dedupe_key="k"))
    api.post("/v1/notifications", send_body(recipient.external_id, dedupe_key="k"))
    PreferenceFactory(user_id=recipient.id, type="comment", channel="in_app", enabled=False)
    api.post("/v1/notifications", send_body(recipient.external_id, dedupe_key="k2"))
    assert published == [[recipient.id]]


def test_get_notification_shows_delivery_state(api, comment_type, recipient):
    result = api.post("/v1/notifications", send_body(recipient.external_id)).get_json()["results"][0]
    db.session.execute(
        sa.text(
            "UPDATE notification_deliveries SET status = 'failed', attempts = 3, "
            "last_error = 'mailbox full', error_kind = 'permanent'"
        )
    )
    response = api.get(f"/v1/notifications/{result['notification_id']}")
    assert response.status_code == 200
    shown = response.get_json()
    assert shown["recipient"] == recipient.external_id and shown["type"] == "comment"
    (delivery,) = shown["deliveries"]
    assert (delivery["channel"], delivery["status"], delivery["attempts"], delivery["last_error"]) == (
        "email",
        "failed",
        3,
        "mailbox full",
    )


@pytest.mark.parametrize("notification_id", ["999999", str(2**63), str(2**70), "0"])
def test_unknown_notification_is_404(api, notification_id):
    response = api.get(f"/v1/notifications/{notification_id}")
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"


def test_database_outage_is_503_problem_not_500(api, comment_type, recipient, monkeypatch):
    from sqlalchemy.exc import OperationalError

    def down(*args, **kwargs):
        raise OperationalError("INSERT …", {}, Exception("connection refused"))

    monkeypatch.setattr("app.api.views.notify", down)
    response = api.post("/v1/notifications", send_body(recipient.external_id))
    assert response.status_code == 503
    assert response.mimetype == "application/problem+json" and response.headers["Retry-After"]
