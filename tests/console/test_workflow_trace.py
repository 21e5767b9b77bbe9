"""A notification's workflow run on the delivery log's detail page: each step's state, time, reason and delivery."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.extensions import db
from app.models import WorkflowStep
from app.workflows import queries, service
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.html import one, parse, table_rows

EVIL = "<script>alert(1)</script>"
EXAMPLE = {
    "steps": [
        {"kind": "channel", "channel": "in_app"},
        {"kind": "delay", "seconds": 1800},
        {"kind": "channel", "channel": "push", "only_if": ["unread"]},
        {"kind": "delay", "seconds": 14400},
        {"kind": "channel", "channel": "sms", "only_if": ["unread"], "condition": f'data.x != "{EVIL}"'},
        {"kind": "digest", "frequency": "daily", "only_if": ["unread"]},
    ]
}


@pytest.fixture
def run(app):
    """A notification accepted an hour ago under the example: push sent, SMS skipped by its condition, the
    digest's row still waiting; return its deliveries by channel."""
    NotificationTypeFactory(type="payment", label="Payment")
    service.save_draft(None, "payment", EXAMPLE)
    version = service.publish(None, "payment")
    step_ids = {s.position: s.id for s in db.session.query(WorkflowStep).filter_by(version_id=version.id)}
    created = datetime.now(UTC) - timedelta(hours=1)
    n = NotificationFactory(user_id=UserFactory(timezone="Asia/Tokyo").id, type="payment", created_at=created,
                            workflow_version_id=version.id, data={"x": EVIL})  # fmt: skip
    rows = {
        "push": DeliveryFactory(notification_id=n.id, channel="push", status="sent", attempts=1,
                                sent_at=created + timedelta(minutes=30), workflow_step_id=step_ids[3]),
        "sms": DeliveryFactory(notification_id=n.id, channel="sms", status="skipped", skip_reason="condition",
                               workflow_step_id=step_ids[5]),
        "email": DeliveryFactory(notification_id=n.id, channel="email", status="pending", attempts=0,
                                 next_attempt_at=created + timedelta(hours=4, minutes=30),
                                 workflow_step_id=step_ids[6]),
    }  # fmt: skip
    db.session.flush()
    return rows


def _states(page: str) -> dict[int, str]:
    return {int(tr["id"].removeprefix("run-step-")): tr["data-state"] for tr in parse(page).select("#run-steps tr[id]")}


def test_the_delivery_page_shows_the_notifications_run(client, operator, run):
    page = client.get(f"/console/deliveries/{run['push'].id}")
    assert page.status_code == 200
    assert one(page.text, "#run-title").get_text() == f"Workflow version {queries.published('payment').version}"
    assert _states(page.text) == {1: "shown", 2: "waited", 3: "sent", 4: "waiting", 5: "skipped", 6: "waiting"}
    rows = table_rows(page.text, "#run-steps")
    assert rows[2][1] == "sent" and "JST" in rows[2][2]  # the operator's zone
    assert rows[2][4] == "this delivery"
    assert one(page.text, "#run-step-3")["aria-current"] == "true"
    assert rows[4][1] == "skipped" and "condition false" in rows[4][3]
    assert one(page.text, "#run-step-5 code").get_text() == f'data.x != "{EVIL}"'
    assert EVIL not in page.text  # the condition is escaped
    assert one(page.text, "#run-step-5 a")["href"] == f"/console/deliveries/{run['sms'].id}"
    assert one(page.text, "#run-step-6 a")["href"] == f"/console/deliveries/{run['email'].id}"
    assert rows[1][1] == "waited" and rows[3][1] == "waiting"


def test_a_notification_from_before_workflows_has_no_run(client, operator):
    NotificationTypeFactory(type="old")
    n = NotificationFactory(type="old", workflow_version_id=None)
    delivery = DeliveryFactory(notification_id=n.id, channel="email", status="sent")
    page = client.get(f"/console/deliveries/{delivery.id}")
    assert page.status_code == 200
    assert not parse(page.text).select("#workflow-run")
