"""Workflows at run time: each sending step's ledger row waits its delays, runs its rules and condition when due,
and a notification keeps the version it was accepted under."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.api_keys.service import create_api_key
from app.extensions import db
from app.inbox import service as inbox
from app.models import ApiKey, NotificationDelivery, NotificationType
from app.notify.schedule import cancel
from app.notify.service import notify
from app.workflows import queries, service
from jobs.delivery import deliver_batch
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.delivery import reload

pytestmark = pytest.mark.committed


def publish(type_: str, steps: list[dict], note: str = "") -> int:
    service.save_draft(None, type_, {"steps": steps})
    return service.publish(None, type_, note).version


def delivery(channel: str = "email") -> NotificationDelivery:
    return db.session.scalars(sa.select(NotificationDelivery).where(NotificationDelivery.channel == channel)).one()


def make_due(row: NotificationDelivery) -> None:
    db.session.execute(
        sa.text("UPDATE notification_deliveries SET next_attempt_at = now() - interval '1 second' WHERE id = :id"),
        {"id": row.id},
    )
    db.session.commit()


def waited(row: NotificationDelivery) -> float:
    return (row.next_attempt_at - row.created_at).total_seconds()


@pytest.fixture
def order_type():
    return NotificationTypeFactory(type="order", default_email=True)


@pytest.fixture
def ada():
    return UserFactory(external_id="ada", email="ada@example.com", timezone="Asia/Tokyo")


def test_a_delayed_step_waits_its_delay_and_is_not_enqueued_at_once(app, order_type, ada):
    publish("order", [{"kind": "channel", "channel": "in_app"}, {"kind": "delay", "seconds": 90},
                      {"kind": "channel", "channel": "email"}])  # fmt: skip

    result = notify(["ada"], type_="order", title="Shipped", body="b", dedupe_key="o1")
    db.session.commit()

    row = delivery()
    assert result.pending["email"] == [] and 89 <= waited(row) <= 91
    assert (row.status, row.escalation) == ("pending", None)  # a plain delay: reading does not cancel it
    assert deliver_batch("email", [row.id]) == {"claimed": 0}  # not due yet


def test_a_condition_false_when_due_skips_the_step_with_its_reason(app, order_type, ada, fake_provider):
    publish("order", [{"kind": "channel", "channel": "in_app"},
                      {"kind": "channel", "channel": "email", "condition": "data.amount > 10000"}])  # fmt: skip

    notify(["ada"], type_="order", title="Small", body="b", dedupe_key="small", data={"amount": 500})
    db.session.commit()
    small = delivery()
    assert deliver_batch("email", [small.id])["skipped"] == 1
    assert (reload(small).status, reload(small).skip_reason) == ("skipped", "condition")

    notify(["ada"], type_="order", title="Large", body="b", dedupe_key="large", data={"amount": 20000})
    db.session.commit()
    large = db.session.scalars(sa.select(NotificationDelivery).where(NotificationDelivery.id != small.id)).one()
    assert deliver_batch("email", [large.id])["sent"] == 1 and len(fake_provider.sent) == 1


def test_an_exit_that_holds_when_a_later_step_is_due_ends_the_run(app, order_type, ada, fake_provider):
    publish("order", [{"kind": "channel", "channel": "in_app"},
                      {"kind": "exit", "condition": "data.cancelled == true"},
                      {"kind": "channel", "channel": "email"}])  # fmt: skip

    notify(["ada"], type_="order", title="Cancelled", body="b", dedupe_key="c", data={"cancelled": True})
    db.session.commit()
    row = delivery()
    assert deliver_batch("email", [row.id])["skipped"] == 1
    assert reload(row).skip_reason == "workflow_exit" and fake_provider.sent == []


def test_reading_before_an_if_unread_step_cancels_it(app, order_type, ada, fake_provider):
    publish("order", [{"kind": "channel", "channel": "in_app"}, {"kind": "delay", "seconds": 60},
                      {"kind": "channel", "channel": "email", "only_if": ["unread"]}])  # fmt: skip
    result = notify(["ada"], type_="order", title="Read me", body="b", dedupe_key="r")
    db.session.commit()
    row = delivery()
    assert row.escalation == "read"

    inbox.mark_read(ada.id, result.recipients[0].notification_id)
    db.session.commit()

    make_due(row)
    assert reload(row).status == "skipped" or deliver_batch("email", [row.id])["skipped"] == 1
    assert reload(row).skip_reason == "read" and fake_provider.sent == []


def test_a_delay_until_the_members_next_local_time(app, order_type, ada):
    publish("order", [{"kind": "channel", "channel": "in_app"}, {"kind": "delay", "local_time": "09:00"},
                      {"kind": "channel", "channel": "email"}])  # fmt: skip

    notify(["ada"], type_="order", title="Morning", body="b", dedupe_key="m")
    db.session.commit()

    due = delivery().next_attempt_at.astimezone(__import__("zoneinfo").ZoneInfo("Asia/Tokyo"))
    assert (due.hour, due.minute) == (9, 0)
    assert timedelta(0) < due - datetime.now(UTC) <= timedelta(days=1)


def test_a_delay_until_a_time_in_the_payload_and_one_that_is_missing(app, order_type, ada):
    publish("order", [{"kind": "channel", "channel": "in_app"}, {"kind": "delay", "until": "data.remind_at"},
                      {"kind": "channel", "channel": "email"}])  # fmt: skip
    at = (datetime.now(UTC) + timedelta(hours=3)).replace(microsecond=0)

    notify(["ada"], type_="order", title="Later", body="b", dedupe_key="u1", data={"remind_at": at.isoformat()})
    notify(["ada"], type_="order", title="Now", body="b", dedupe_key="u2", data={"remind_at": "not a time"})
    db.session.commit()

    later, now = db.session.scalars(sa.select(NotificationDelivery).order_by(NotificationDelivery.id)).all()
    assert later.next_attempt_at == at
    assert waited(now) < 1  # a missing or unreadable time waits nothing


def test_a_notification_keeps_the_version_it_was_accepted_under(app, order_type, ada, fake_provider):
    first = publish("order", [{"kind": "channel", "channel": "in_app"}, {"kind": "delay", "seconds": 60},
                              {"kind": "channel", "channel": "email", "condition": "data.amount > 10"}])  # fmt: skip
    notify(["ada"], type_="order", title="Old", body="b", dedupe_key="old", data={"amount": 50})
    db.session.commit()
    old = delivery()

    second = publish("order", [{"kind": "channel", "channel": "in_app"},
                               {"kind": "channel", "channel": "email", "condition": "data.amount > 100"}])  # fmt: skip
    assert (first, second) == (2, 3)  # version 1: the factory's columns

    notify(["ada"], type_="order", title="New", body="b", dedupe_key="new", data={"amount": 50})
    db.session.commit()
    new = db.session.scalars(sa.select(NotificationDelivery).where(NotificationDelivery.id != old.id)).one()
    assert waited(new) < 1 and 59 <= waited(old) <= 61

    make_due(old)
    assert deliver_batch("email", [old.id])["sent"] == 1  # v1's condition: 50 > 10
    assert deliver_batch("email", [new.id])["skipped"] == 1  # v2's: 50 > 100 fails
    versions = db.session.execute(sa.text("SELECT title, workflow_version_id FROM notifications ORDER BY id")).all()
    assert [v.version for v in map(queries.version_by_id, (r.workflow_version_id for r in versions))] == [2, 3]


def test_a_type_written_straight_into_the_table_gets_its_first_version_from_the_sweeper(app):
    db.session.execute(sa.text(
        "INSERT INTO notification_types (type, label, default_email, escalate_after) VALUES ('raw', 'Raw', true, 30)"
    ))  # fmt: skip
    db.session.commit()
    assert service.ensure_versions() == 1
    db.session.commit()

    published = queries.published("raw")
    assert published.version == 1
    assert published.steps["steps"][1] == {"kind": "delay", "seconds": 30}
    assert db.session.get(NotificationType, "raw").workflow_version_id == published.id
    assert service.ensure_versions() == 0


def test_a_cancellation_stops_the_run_at_its_next_step(app, order_type, ada, fake_provider):
    create_api_key(None, "orders", ["notifications:write"])
    key_id = db.session.scalars(sa.select(ApiKey.id)).one()
    publish("order", [{"kind": "channel", "channel": "in_app"}, {"kind": "delay", "seconds": 60},
                      {"kind": "channel", "channel": "email"}])  # fmt: skip
    notify(["ada"], type_="order", title="Order 7", body="b", dedupe_key="o7", cancellation_key="order:7",
           api_key_id=key_id)  # fmt: skip
    db.session.commit()
    row = delivery()

    cancelled = cancel("order:7", api_key_id=key_id)
    db.session.commit()

    assert cancelled.deliveries == 1  # a waiting step without a read rule counts as a delivery not yet sent
    make_due(row)
    assert deliver_batch("email", [row.id]) == {"claimed": 0}
    assert (reload(row).status, reload(row).skip_reason) == ("skipped", "cancelled") and fake_provider.sent == []


def chain_rows(notification_id: int) -> list[tuple]:
    db.session.expire_all()
    return [tuple(r) for r in db.session.execute(sa.text(
        "SELECT channel, status, skip_reason FROM notification_deliveries WHERE notification_id = :id ORDER BY id"
    ), {"id": notification_id})]  # fmt: skip


def test_in_a_first_chain_a_false_condition_hands_over_and_the_next_step_keeps_its_delay(app, ada, fake_provider,
                                                                                           monkeypatch):  # fmt: skip
    NotificationTypeFactory(type="alert", default_email=True, default_push=True, channel_mode="first")
    monkeypatch.setitem(app.config, "PUSH_PROVIDER", "fake")
    publish("alert", [{"kind": "channel", "channel": "in_app"},
                      {"kind": "channel", "channel": "push", "condition": "data.urgent == true"},
                      {"kind": "delay", "seconds": 300},
                      {"kind": "channel", "channel": "email"}])  # fmt: skip
    result = notify(["ada"], type_="alert", title="Calm", body="b", dedupe_key="calm", data={"urgent": False})
    db.session.commit()
    notification_id = result.recipients[0].notification_id
    push, email = delivery("push"), delivery("email")
    assert (push.status, email.status) == ("pending", "standby")

    deliver_batch("push", [push.id])

    assert chain_rows(notification_id) == [("push", "passed", "condition"), ("email", "pending", None)]
    assert 295 <= waited(reload(email)) <= 305  # handed over, but due when its own step is


def test_in_a_first_chain_an_exit_closes_the_rest(app, ada, fake_provider, monkeypatch):
    NotificationTypeFactory(type="alert", default_email=True, default_push=True, channel_mode="first")
    monkeypatch.setitem(app.config, "PUSH_PROVIDER", "fake")
    publish("alert", [{"kind": "channel", "channel": "in_app"}, {"kind": "exit", "condition": "data.done"},
                      {"kind": "channel", "channel": "push"}, {"kind": "channel", "channel": "email"}])  # fmt: skip
    result = notify(["ada"], type_="alert", title="Done", body="b", dedupe_key="done", data={"done": True})
    db.session.commit()

    deliver_batch("push", [delivery("push").id])

    assert chain_rows(result.recipients[0].notification_id) == [
        ("push", "skipped", "workflow_exit"), ("email", "skipped", "workflow_exit")]  # fmt: skip


def test_a_condition_reads_the_members_properties(app, order_type, fake_provider):
    UserFactory(external_id="pro", email="pro@example.com", properties={"plan": "pro"})
    UserFactory(external_id="free", email="free@example.com", properties={"plan": "free"})
    pro_only = {"kind": "channel", "channel": "email", "condition": "recipient.properties.plan == 'pro'"}
    publish("order", [{"kind": "channel", "channel": "in_app"}, pro_only])
    notify(["pro", "free"], type_="order", title="Plans", body="b", dedupe_key="plans")
    db.session.commit()

    rows = db.session.scalars(sa.select(NotificationDelivery).order_by(NotificationDelivery.id)).all()
    assert deliver_batch("email", [r.id for r in rows]) == {"claimed": 2, "sent": 1, "skipped": 1}
    assert [m.to for m in fake_provider.sent] == ["pro@example.com"]


def test_a_condition_reads_the_tenant_the_notification_was_sent_for(app, order_type, fake_provider):
    from app.tenants import service as tenants

    acme, _ = tenants.put_tenant(None, "acme", {"name": "Acme"})
    for ref in ("in-acme", "no-tenant"):
        UserFactory(external_id=ref, email=f"{ref}@example.com")
    tenants.set_member_tenants(None, db.session.scalar(sa.text("SELECT id FROM users WHERE external_id = 'in-acme'")),
                               ["acme"])  # fmt: skip
    acme_only = {"kind": "channel", "channel": "email", "condition": "tenant.key == 'acme' && tenant.name == 'Acme'"}
    publish("order", [{"kind": "channel", "channel": "in_app"}, acme_only])
    notify(["in-acme"], type_="order", title="For Acme", body="b", dedupe_key="t1", tenant_id=acme.id)
    notify(["no-tenant"], type_="order", title="For none", body="b", dedupe_key="t2")
    db.session.commit()

    rows = db.session.scalars(sa.select(NotificationDelivery).order_by(NotificationDelivery.id)).all()
    assert deliver_batch("email", [r.id for r in rows]) == {"claimed": 2, "sent": 1, "skipped": 1}
    assert [m.to for m in fake_provider.sent] == ["in-acme@example.com"]  # a missing tenant.key is false
