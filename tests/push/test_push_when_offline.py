"""Push only when offline (issue 30, seed 004): a type's push waits REALTIME_ACK_TIMEOUT_SECONDS for a tab of the
member to ack the frame that showed the notification, and goes only if none did."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.delivery.policy import Plan, apply_tab_acks
from app.delivery.queries import BatchRow
from app.extensions import db, redis
from app.live import seen
from jobs.delivery import deliver_batch
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.delivery import reload
from tests.support.push import add_subscription

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
WAIT = timedelta(seconds=5)


def row(notification_id: int, created: datetime, channel: str = "push", flag: bool = True) -> BatchRow:
    return BatchRow(id=notification_id, channel=channel, attempts=0, locked_until=NOW,
                    notification_id=notification_id, type="t", title="T", body="B", link_path=None, data={},
                    user_id=1, email="a@example.com", display_name="A", locale="en", timezone="UTC",
                    quiet_hours_start=None, quiet_hours_end=None, type_label="T", priority="default",
                    mandatory=False, allowed=True, suppressed=False, created_at=created,
                    push_when_offline=flag)  # fmt: skip


def test_acked_is_skipped_waiting_is_held_until_the_timeout_and_late_goes():
    acked, fresh, late = row(1, NOW), row(2, NOW - timedelta(seconds=1)), row(3, NOW - timedelta(seconds=6))
    other_type, email = row(4, NOW, flag=False), row(5, NOW, channel="email")
    plan = Plan(send=[acked, fresh, late, other_type, email])
    apply_tab_acks(plan, {(1, 1)}, NOW, WAIT)
    assert plan.skip == [(acked, "seen_in_app")]
    assert plan.hold == [(fresh, fresh.created_at + WAIT)]
    assert plan.send == [late, other_type, email]


@pytest.fixture
def offline_type():
    return NotificationTypeFactory(type="reply", default_push=True, push_when_offline=True)


def push_row(user, type_, created: datetime):
    note = NotificationFactory(user_id=user.id, type=type_.type, title="Ann replied", body="Hi")
    delivery = DeliveryFactory(notification_id=note.id, channel="push")
    db.session.execute(sa.text("UPDATE notification_deliveries SET created_at = :at WHERE id = :id"),
                       {"at": created, "id": delivery.id})  # fmt: skip
    db.session.commit()
    return note, delivery


@pytest.mark.committed
def test_the_engine_skips_what_a_tab_showed_holds_what_may_still_be_acked_and_pushes_the_rest(
    app, vapid, push_service, offline_type
):
    user = UserFactory()
    add_subscription(user, push_service.subscribe())
    now = datetime.now(UTC)
    shown, shown_row = push_row(user, offline_type, now)
    _, waiting_row = push_row(user, offline_type, now)
    _, unseen_row = push_row(user, offline_type, now - timedelta(seconds=30))
    seen.record(redis.realtime(), user.id, [shown.id])  # the member's tab acked the frame that showed it

    counts = deliver_batch("push", [shown_row.id, waiting_row.id, unseen_row.id])

    assert counts.get("sent") == 1 and counts.get("skipped") == 1, counts
    assert (reload(shown_row).status, reload(shown_row).skip_reason) == ("skipped", "seen_in_app")
    held = reload(waiting_row)
    timeout = timedelta(seconds=app.config["REALTIME_ACK_TIMEOUT_SECONDS"])
    assert held.status == "pending" and held.attempts == 0
    assert abs(held.next_attempt_at - (held.created_at + timeout)) < timedelta(seconds=1)
    assert reload(unseen_row).status == "sent" and len(push_service.received) == 1


@pytest.mark.committed
def test_without_the_realtime_store_the_push_goes(app, vapid, push_service, offline_type, monkeypatch):
    monkeypatch.setitem(app.config, "REALTIME_REDIS_URL", "redis://127.0.0.1:1/0")
    user = UserFactory()
    add_subscription(user, push_service.subscribe())
    _, delivery = push_row(user, offline_type, datetime.now(UTC) - timedelta(seconds=30))
    assert deliver_batch("push", [delivery.id]).get("sent") == 1  # nobody can tell a tab showed it: it goes
