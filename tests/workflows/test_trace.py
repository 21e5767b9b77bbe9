"""A notification's run, step by step, from its version and its ledger rows."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import NotificationDelivery
from app.notify.service import notify
from app.workflows import service
from app.workflows.trace import notification_trace
from jobs.delivery import deliver_batch
from tests.factories import NotificationTypeFactory, UserFactory

pytestmark = pytest.mark.committed


def trace_of(notification_id: int) -> dict:
    n = db.session.execute(sa.text(
        "SELECT n.*, u.timezone FROM notifications n JOIN users u ON u.id = n.user_id WHERE n.id = :id"
    ), {"id": notification_id}).mappings().one()  # fmt: skip
    ledger = sa.text("SELECT * FROM notification_deliveries WHERE notification_id = :id")
    rows = [dict(r) for r in db.session.execute(ledger, {"id": notification_id}).mappings()]
    return notification_trace(n, rows)


def test_the_trace_tells_each_step(app, fake_provider):
    NotificationTypeFactory(type="order", default_email=True, default_push=True)
    UserFactory(external_id="ada", email="ada@example.com")
    service.save_draft(None, "order", {"steps": [
        {"kind": "channel", "channel": "in_app"},
        {"kind": "channel", "channel": "email", "condition": "data.amount > 10"},
        {"kind": "delay", "seconds": 600},
        {"kind": "channel", "channel": "push", "only_if": ["unread"]},
    ]})  # fmt: skip
    service.publish(None, "order")
    result = notify(["ada"], type_="order", title="Small", body="b", dedupe_key="s", data={"amount": 5})
    db.session.commit()
    email = db.session.scalars(sa.select(NotificationDelivery).filter_by(channel="email")).one()
    deliver_batch("email", [email.id])

    trace = trace_of(result.recipients[0].notification_id)

    assert trace["version"] == 2
    states = [(s["position"], s["kind"], s["state"], s["reason"]) for s in trace["steps"]]
    assert states == [
        (1, "channel", "shown", None),
        (2, "channel", "skipped", "condition"),  # checked when it was due: 5 > 10 is false
        (3, "delay", "waiting", None),
        (4, "channel", "skipped", "no_push_subscription"),  # the ingest knew at once: nowhere to push
    ]
    assert trace["steps"][1]["condition"] == "data.amount > 10" and trace["steps"][1]["delivery_id"] == email.id


def test_a_channel_the_member_turned_off_is_not_sent(app):
    NotificationTypeFactory(type="order", default_email=False)
    UserFactory(external_id="bo", email="bo@example.com")
    result = notify(["bo"], type_="order", title="Hi", body="b", dedupe_key="o")
    db.session.commit()

    steps = {s["channel"]: s["state"] for s in trace_of(result.recipients[0].notification_id)["steps"]}
    assert steps["in_app"] == "shown" and steps["email"] == "not_sent"


def test_a_notification_from_before_workflows_has_no_trace(app):
    assert notification_trace({"workflow_version_id": None}, []) is None
