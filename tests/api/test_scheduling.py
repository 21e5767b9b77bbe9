"""POST /v1/notifications with send_at, cancellation_key and group_key; DELETE /v1/cancellations/<key>."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from app import keyspace
from app.api_keys.service import create_api_key
from app.extensions import db
from app.queueing import get_queue
from tests.api.conftest import count, new_key, send_body
from tests.factories import NotificationTypeFactory, UserFactory


def later(**delta) -> datetime:
    return datetime.now(UTC) + timedelta(**delta)


def rfc3339(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def problem_fields(response) -> list[str]:
    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    return [error["field"] for error in response.get_json()["errors"]]


def test_future_send_at_stores_a_schedule_and_nothing_visible(api, comment_type, recipient, redis_client):
    send_at = later(hours=2).astimezone(timezone(timedelta(hours=9)))  # an offset other than UTC
    response = api.post(
        "/v1/notifications",
        send_body(recipient.external_id, send_at=rfc3339(send_at), group_key="post:1", cancellation_key="c:1"),
    )
    assert response.status_code == 202
    body = response.get_json()
    assert body["status"] == "scheduled" and body["scheduled"] == 1 and body["existing"] == 0
    assert datetime.fromisoformat(body["send_at"]) == send_at.replace(microsecond=0)
    assert body["results"] == [{"recipient": recipient.external_id, "status": "scheduled"}]
    row = db.session.execute(sa.text("SELECT * FROM scheduled_notifications")).mappings().one()
    assert (row["user_id"], row["title"], row["group_key"], row["cancellation_key"]) == (
        recipient.id,
        "New comment",
        "post:1",
        "c:1",
    )
    assert row["send_at"] == send_at.replace(microsecond=0)
    assert count("notifications") == 0 and count("notification_deliveries") == 0
    assert len(get_queue("default")) == 0


def test_send_at_in_the_past_means_now(api, comment_type, recipient):
    response = api.post("/v1/notifications", send_body(recipient.external_id, send_at="2020-01-01T00:00:00Z"))
    assert response.status_code == 202
    assert response.get_json()["created"] == 1 and "status" not in response.get_json()
    assert count("notifications") == 1 and count("scheduled_notifications") == 0


@pytest.mark.parametrize(
    "value",
    [
        "2026-12-01T09:00:00",  # no offset
        "2026-12-01 09:00:00Z",  # not RFC 3339's T
        "tomorrow",
        "2026-12-01",
        "1764579600",
        "2026-02-30T09:00:00Z",  # the shape, but no such day
        "2026-12-01T25:00:00+09:00",
    ],
)
def test_send_at_that_is_not_rfc3339_is_422_naming_the_field(api, comment_type, recipient, value):
    response = api.post("/v1/notifications", send_body(recipient.external_id, send_at=value))
    assert problem_fields(response) == ["send_at"]
    assert count("scheduled_notifications") == 0 and count("notifications") == 0


def test_send_at_as_a_number_is_422(api, comment_type, recipient):
    response = api.post("/v1/notifications", send_body(recipient.external_id, send_at=1764579600))
    assert problem_fields(response) == ["send_at"]


def test_send_at_may_be_90_days_ahead_but_not_more(api, comment_type, recipient):
    ok = api.post("/v1/notifications", send_body(recipient.external_id, send_at=rfc3339(later(days=89, hours=23))))
    assert ok.status_code == 202 and ok.get_json()["status"] == "scheduled"
    too_far = api.post(
        "/v1/notifications", send_body(recipient.external_id, title="Other", send_at=rfc3339(later(days=90, hours=1)))
    )
    assert problem_fields(too_far) == ["send_at"]
    assert "90 days" in too_far.get_json()["errors"][0]["message"]
    assert count("scheduled_notifications") == 1


def test_fractions_and_lowercase_rfc3339_are_accepted(api, comment_type, recipient):
    value = later(days=1).strftime("%Y-%m-%dt%H:%M:%S.123456789z")
    response = api.post("/v1/notifications", send_body(recipient.external_id, send_at=value))
    assert response.status_code == 202 and response.get_json()["status"] == "scheduled"


@pytest.mark.parametrize("field", ["group_key", "cancellation_key"])
def test_keys_are_1_to_200_characters(api, comment_type, recipient, field):
    assert problem_fields(api.post("/v1/notifications", send_body(recipient.external_id, **{field: ""}))) == [field]
    too_long = api.post("/v1/notifications", send_body(recipient.external_id, **{field: "x" * 201}))
    assert problem_fields(too_long) == [field]
    assert problem_fields(api.post("/v1/notifications", send_body(recipient.external_id, **{field: None}))) == [field]
    ok = api.post("/v1/notifications", send_body(recipient.external_id, **{field: "x" * 200}))
    assert ok.status_code == 202
    assert db.session.execute(sa.text(f"SELECT {field} FROM notifications")).scalar_one() == "x" * 200


def test_scheduling_is_all_or_nothing_for_unknown_recipients(api, comment_type, recipient):
    body = send_body(recipient.external_id, "nobody", send_at=rfc3339(later(hours=1)))
    response = api.post("/v1/notifications", body)
    assert response.status_code == 422 and response.get_json()["unknown_recipients"] == ["nobody"]
    unknown_type = api.post("/v1/notifications", {**body, "recipients": [recipient.external_id], "type": "nope"})
    assert problem_fields(unknown_type) == ["type"]
    assert count("scheduled_notifications") == 0


def test_a_scheduled_dedupe_key_is_not_scheduled_twice(api, comment_type, recipient):
    body = send_body(recipient.external_id, dedupe_key="remind:1", send_at=rfc3339(later(hours=1)))
    assert api.post("/v1/notifications", body).get_json()["scheduled"] == 1
    again = api.post("/v1/notifications", {**body, "send_at": rfc3339(later(hours=3))}).get_json()
    assert (again["scheduled"], again["existing"], again["results"][0]["status"]) == (0, 1, "existing")
    # A notification already sent under the key: scheduling it again is a repeat too.
    other = UserFactory()
    api.post("/v1/notifications", send_body(other.external_id, dedupe_key="remind:1"))
    later_one = api.post("/v1/notifications", {**body, "recipients": [other.external_id]}).get_json()
    assert later_one["existing"] == 1
    assert count("scheduled_notifications") == 1


def test_idempotency_key_replays_the_scheduled_answer(api, comment_type, recipient):
    key = new_key()
    body = send_body(recipient.external_id, send_at=rfc3339(later(hours=1)))
    first = api.post("/v1/notifications", body, idempotency_key=key)
    replay = api.post("/v1/notifications", body, idempotency_key=key)
    assert replay.status_code == 202 and replay.headers["Idempotent-Replayed"] == "true"
    assert replay.get_json() == first.get_json()
    assert count("scheduled_notifications") == 1


def test_a_muted_thread_is_stored_read_and_hidden_without_email(api, comment_type, recipient, redis_client):
    db.session.execute(
        sa.text("INSERT INTO notification_mutes (user_id, group_key) VALUES (:u, 'post:9')"), {"u": recipient.id}
    )
    pubsub = redis_client.pubsub()
    pubsub.psubscribe(keyspace.key("*"))  # this installation's channels only (others share the server)
    pubsub.get_message(timeout=1)
    response = api.post("/v1/notifications", send_body(recipient.external_id, group_key="post:9"))
    assert response.status_code == 202 and response.get_json()["created"] == 1
    row = db.session.execute(sa.text("SELECT in_app, read_at, group_key FROM notifications")).one()
    assert row.in_app is False and row.read_at is not None and row.group_key == "post:9"
    delivery = db.session.execute(sa.text("SELECT status, skip_reason FROM notification_deliveries")).one()
    assert tuple(delivery) == ("skipped", "muted")
    assert len(get_queue("default")) == 0
    assert pubsub.get_message(timeout=0.3) is None  # no badge event
    pubsub.close()
    # Another thread of the same user is not muted.
    other = api.post("/v1/notifications", send_body(recipient.external_id, group_key="post:10", title="Other"))
    assert other.status_code == 202
    assert count("notifications", "in_app AND read_at IS NULL") == 1
    assert len(get_queue("default")) == 1


def test_mandatory_types_are_never_muted(api, recipient):
    NotificationTypeFactory(type="security", default_email=True, mandatory=True)
    db.session.execute(
        sa.text("INSERT INTO notification_mutes (user_id, group_key) VALUES (:u, 'acct')"), {"u": recipient.id}
    )
    api.post("/v1/notifications", {**send_body(recipient.external_id, group_key="acct"), "type": "security"})
    assert count("notifications", "in_app AND read_at IS NULL") == 1
    assert count("notification_deliveries", "status = 'pending'") == 1


# --- DELETE /v1/cancellations/<key> ------------------------------------------------------------------


def _pending(where: str = "true") -> int:
    return count("notification_deliveries", f"status = 'pending' AND {where}")


def test_cancellation_removes_schedules_and_skips_pending_deliveries(api, comment_type):
    users = UserFactory.create_batch(3)
    ids = [u.external_id for u in users]
    api.post("/v1/notifications", send_body(*ids, cancellation_key="order:1", send_at=rfc3339(later(hours=1))))
    api.post("/v1/notifications", send_body(*ids[:2], cancellation_key="order:1", title="Now"))
    api.post("/v1/notifications", send_body(*ids, cancellation_key="order:2", title="Other key"))
    first = "(SELECT min(id) FROM notification_deliveries)"  # one of "Now"'s: make it a waiting escalation
    db.session.execute(sa.text(f"UPDATE notification_deliveries SET escalation = 'read' WHERE id = {first}"))

    response = api.delete("/v1/cancellations/order:1")

    assert response.status_code == 200
    assert response.get_json() == {"cancellation_key": "order:1", "scheduled": 3, "deliveries": 1, "escalations": 1}
    assert count("scheduled_notifications") == 0
    skipped = db.session.execute(
        sa.text(
            "SELECT d.skip_reason FROM notification_deliveries d JOIN notifications n ON n.id = d.notification_id "
            "WHERE n.cancellation_key = 'order:1'"
        )
    ).scalars()
    assert list(skipped) == ["cancelled", "cancelled"]
    assert _pending() == 3  # order:2 untouched
    # The notifications already visible stay in the inbox: only what has not happened yet is cancelled.
    assert count("notifications", "cancellation_key = 'order:1' AND read_at IS NULL") == 2


def test_cancellation_is_idempotent(api, comment_type, recipient):
    api.post(
        "/v1/notifications", send_body(recipient.external_id, cancellation_key="k", send_at=rfc3339(later(hours=1)))
    )
    assert api.delete("/v1/cancellations/k").get_json()["scheduled"] == 1
    again = api.delete("/v1/cancellations/k")
    assert again.status_code == 200
    assert again.get_json() == {"cancellation_key": "k", "scheduled": 0, "deliveries": 0, "escalations": 0}
    unknown = api.delete("/v1/cancellations/never-used")
    assert unknown.status_code == 200 and unknown.get_json()["scheduled"] == 0


def test_another_api_keys_rows_under_the_same_key_are_untouched(api, client, comment_type, recipient):
    api.post(
        "/v1/notifications", send_body(recipient.external_id, cancellation_key="k", send_at=rfc3339(later(hours=1)))
    )
    api.post("/v1/notifications", send_body(recipient.external_id, cancellation_key="k", title="Now"))
    other = create_api_key(None, "other", ["notifications:write"])
    response = client.delete("/v1/cancellations/k", headers={"Authorization": f"Bearer {other}"})
    assert response.status_code == 200
    assert response.get_json() == {"cancellation_key": "k", "scheduled": 0, "deliveries": 0, "escalations": 0}
    assert count("scheduled_notifications") == 1 and _pending() == 1


def test_cancellation_needs_the_write_scope(client, comment_type):
    read_only = create_api_key(None, "reader", ["notifications:read"])
    response = client.delete("/v1/cancellations/k", headers={"Authorization": f"Bearer {read_only}"})
    assert response.status_code == 403 and response.get_json()["scope"] == "notifications:write"
    assert client.delete("/v1/cancellations/k").status_code == 401


def test_cancellation_key_in_the_url_is_validated(api):
    response = api.delete("/v1/cancellations/" + "x" * 201)
    assert response.status_code == 422 and response.mimetype == "application/problem+json"


def test_the_spec_describes_the_new_fields_and_endpoint(client):
    spec = client.get("/v1/openapi.json").get_json()
    fields = spec["components"]["schemas"]["NotificationIn"]["properties"]
    assert fields["send_at"]["format"] == "date-time" and "90 days" in fields["send_at"]["description"]
    assert fields["group_key"]["maxLength"] == 200 and fields["cancellation_key"]["maxLength"] == 200
    accepted = spec["paths"]["/v1/notifications"]["post"]["responses"]["202"]["content"]["application/json"]
    assert {s["$ref"].rsplit("/", 1)[1] for s in accepted["schema"]["oneOf"]} == {
        "NotificationAccepted",
        "NotificationScheduled",
        "TopicNotificationAccepted",
    }
    cancel = spec["paths"]["/v1/cancellations/{cancellation_key}"]["delete"]
    assert cancel["security"] == [{"bearerAuth": ["notifications:write"]}]
    assert set(cancel["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].split("/")[-1:]) == {
        "CancellationOut"
    }
