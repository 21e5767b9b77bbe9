"""Web Push end to end against a local push service: VAPID verified, payload decrypted, 404/410/429 handled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from app.extensions import db
from app.models import PushSubscription
from app.providers.webpush import WebPushProvider, origin_key, retry_after
from jobs.delivery import deliver_batch
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.delivery import reload
from tests.support.push import add_subscription
from tests.support.waiting import free_port


def push_delivery(user, priority="default", title="Build failed", body="main is red", link_path="/builds/7"):
    type_ = NotificationTypeFactory(type=f"build-{priority}", label="Builds", default_push=True, priority=priority)
    note = NotificationFactory(user_id=user.id, type=type_.type, title=title, body=body, link_path=link_path)
    delivery = DeliveryFactory(notification_id=note.id, channel="push")
    db.session.flush()
    return delivery, note


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_push_is_signed_encrypted_and_recorded(app, vapid, push_service):
    user = UserFactory()
    phone, laptop = (add_subscription(user, push_service.subscribe()) for _ in range(2))
    delivery, note = push_delivery(user, priority="high")

    assert deliver_batch("push", [delivery.id])["sent"] == 1

    assert push_service.rejected == []
    assert sorted(r.endpoint for r in push_service.received) == sorted([phone.endpoint, laptop.endpoint])
    got = push_service.received[0]
    tag = f"build-high:{note.id}"
    assert got.payload == {
        "title": "Build failed",
        "body": "main is red",
        "url": f"{app.config['BASE_URL']}/builds/7",
        "tag": tag,
    }
    assert got.claims["aud"] == push_service.origin and got.claims["sub"] == "mailto:ops@hato.test"
    assert (got.headers["ttl"], got.headers["urgency"], got.headers["topic"]) == ("900", "high", tag.replace(":", "-"))
    row = reload(delivery)
    assert (row.status, row.provider, row.attempts) == ("sent", "webpush", 1)
    assert row.provider_message_id.startswith(push_service.origin)
    db.session.expire_all()
    assert db.session.get(PushSubscription, phone.id).last_success_at is not None


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_low_priority_gets_low_urgency_and_a_long_ttl(app, vapid, push_service):
    user = UserFactory()
    add_subscription(user, push_service.subscribe())
    delivery, _ = push_delivery(user, priority="low")
    deliver_batch("push", [delivery.id])
    assert (push_service.received[0].headers["urgency"], push_service.received[0].headers["ttl"]) == ("low", "259200")


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_gone_subscription_is_invalidated_and_the_row_fails(app, vapid, push_service):
    user = UserFactory()
    sub = add_subscription(user, push_service.subscribe())
    push_service.answer[sub.endpoint] = (410, {})
    delivery, _ = push_delivery(user)

    assert deliver_batch("push", [delivery.id])["failed"] == 1

    row = reload(delivery)
    assert (row.status, row.error_kind) == ("failed", "subscription_gone")
    assert db.session.get(PushSubscription, sub.id).invalidated_at is not None
    # The next message for this user finds no active subscription and is skipped, not sent.
    again = DeliveryFactory(
        notification_id=NotificationFactory(user_id=user.id, type="build-default").id, channel="push"
    )
    db.session.flush()
    assert deliver_batch("push", [again.id])["skipped"] == 1
    assert reload(again).skip_reason == "no_subscription"


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_one_gone_device_does_not_fail_the_others(app, vapid, push_service):
    user = UserFactory()
    alive = add_subscription(user, push_service.subscribe())
    dead = add_subscription(user, push_service.subscribe())
    push_service.answer[dead.endpoint] = (404, {})
    delivery, _ = push_delivery(user)

    assert deliver_batch("push", [delivery.id])["sent"] == 1
    db.session.expire_all()
    assert db.session.get(PushSubscription, dead.id).invalidated_at is not None
    assert db.session.get(PushSubscription, alive.id).invalidated_at is None


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_429_is_transient_and_honours_retry_after(app, vapid, push_service):
    user = UserFactory()
    sub = add_subscription(user, push_service.subscribe())
    push_service.answer[sub.endpoint] = (429, {"Retry-After": "120"})
    delivery, _ = push_delivery(user)

    assert deliver_batch("push", [delivery.id])["pending"] == 1

    row = reload(delivery)
    assert (row.status, row.error_kind, row.attempts) == ("pending", None, 1)
    assert row.next_attempt_at >= datetime.now(UTC) + timedelta(seconds=118)
    assert db.session.get(PushSubscription, sub.id).invalidated_at is None


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_503_is_transient(app, vapid, push_service):
    user = UserFactory()
    sub = add_subscription(user, push_service.subscribe())
    push_service.answer[sub.endpoint] = (503, {})
    delivery, _ = push_delivery(user)
    assert deliver_batch("push", [delivery.id])["pending"] == 1
    assert "503" in reload(delivery).last_error


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_unreachable_push_service_is_transient(app, vapid, push_service):
    user = UserFactory()
    subscription = push_service.subscribe()
    add_subscription(user, {**subscription, "endpoint": f"http://127.0.0.1:{free_port()}/push/x"})
    delivery, _ = push_delivery(user)
    assert deliver_batch("push", [delivery.id])["pending"] == 1
    row = reload(delivery)
    assert (row.attempts, row.status) == (1, "pending") and "Connection" in row.last_error


NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("315360000", 600.0),  # ten years: capped
        ("9" * 5000, 600.0),  # int() refuses 5,000 digits; still only the cap
        (format_datetime(datetime.fromtimestamp(NOW + 90, UTC), usegmt=True), 90.0),
        ("Fri, 31 Dec 9999 23:59:59 GMT", 600.0),
        (format_datetime(datetime.fromtimestamp(NOW - 90, UTC), usegmt=True), 0.0),  # in the past: now
        ("\u00b2", None),  # isdigit() but not a number
        ("\u0663\u0660", None),  # non-ASCII digits
        ("-1", None),
        ("1e9", None),
        ("12.5", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_is_delta_seconds_or_an_http_date_and_capped(header, seconds):
    assert retry_after(header, 600.0, now=NOW) == seconds


def test_origin_key_is_host_and_port():
    assert origin_key("https://FCM.googleapis.com/fcm/send/x") == "fcm.googleapis.com:443"
    assert origin_key("http://127.0.0.1:8080/push/x") == "127.0.0.1:8080"
    assert origin_key("https://user@evil.example:444/x") == "evil.example:444"


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_an_unexpected_error_on_one_device_is_that_devices_transient_failure(app, vapid, push_service, monkeypatch):
    user = UserFactory()
    broken = add_subscription(user, push_service.subscribe())
    working = add_subscription(user, push_service.subscribe())
    breaking = {broken.endpoint}
    real = WebPushProvider.vapid_headers

    def vapid_headers(self, endpoint):  # stands in for anything unforeseen while sending to one device
        if endpoint in breaking:
            raise RuntimeError("something nobody classified")
        return real(self, endpoint)

    monkeypatch.setattr(WebPushProvider, "vapid_headers", vapid_headers)
    delivery, _ = push_delivery(user)
    assert deliver_batch("push", [delivery.id]).get("pending") == 1  # back for the broken device alone
    assert [r.endpoint for r in push_service.received] == [working.endpoint]
    assert reload(delivery).reached == [working.endpoint]  # its next try leaves the working one out

    # A user whose only device breaks: their row is a transient failure; the next user's row still goes out.
    unlucky, other = UserFactory(), UserFactory()
    breaking.add(add_subscription(unlucky, push_service.subscribe()).endpoint)
    add_subscription(other, push_service.subscribe())
    first, _ = push_delivery(unlucky)
    second, _ = push_delivery(other)
    counts = deliver_batch("push", [first.id, second.id])
    assert (counts.get("pending"), counts.get("sent")) == (1, 1)
    row = reload(first)
    assert (row.status, row.attempts) == ("pending", 1) and "RuntimeError" in row.last_error
