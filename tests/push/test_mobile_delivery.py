"""Issue 28 item 2: push means phone and browser. One push row reaches a member's browser (Web Push), iPhone
(APNs) and Android phone (FCM) through the engine, each target through its own part, against stand-ins that
speak each protocol; a part's refusal, pause or slowness touches only its own targets."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from app.devices import service as devices
from app.extensions import db
from app.models import MessageTemplate
from app.providers.apns import close_connections
from jobs.delivery import deliver_batch
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.apns_server import TOPIC, Answer, ApnsServer, device_token
from tests.support.delivery import reload
from tests.support.fcm_server import FcmServer
from tests.support.push import add_subscription

ANDROID = "fcm-token:APA91b" + "z" * 60


@pytest.fixture
def apns(app, tmp_path, monkeypatch):
    with ApnsServer(tmp_path, topics=(TOPIC, "com.example.hato")) as server:
        for name, value in server.settings().items():
            if name.startswith("APNS_"):
                monkeypatch.setitem(app.config, name, value)
        yield server
        close_connections()


@pytest.fixture
def fcm(app, tmp_path, monkeypatch):
    from app.providers.fcm_transport import close_transports

    with FcmServer() as server:
        for name, value in server.settings(server.service_account(tmp_path)).items():
            if name.startswith("FCM_"):
                monkeypatch.setitem(app.config, name, value)
        yield server
        close_transports()


def member_with_everything(push_service, iphone: str, locale: str = "ja"):
    """A member with a browser, an iPhone (in locale) and an Android phone, and two unread notifications."""
    user = UserFactory(locale="en")
    add_subscription(user, push_service.subscribe())
    devices.register(user.id, {"platform": "ios", "token": iphone, "locale": locale, "app_id": "com.example.hato"})
    devices.register(user.id, {"platform": "android", "token": ANDROID})
    return user


def push_row(user, group_key: str | None = "order-42"):
    kind = NotificationTypeFactory(type="order-shipped", label="Orders", default_push=True, priority="high")
    NotificationFactory(user_id=user.id, type=kind.type, title="Older", body="unread too")
    note = NotificationFactory(user_id=user.id, type=kind.type, title="Shipped", body="Your order left",
                               group_key=group_key, link_path="/orders/42")  # fmt: skip
    delivery = DeliveryFactory(notification_id=note.id, channel="push")
    db.session.commit()
    return note, delivery


def attempt_providers(delivery_id: int) -> list[str]:
    sql = sa.text("SELECT provider FROM delivery_attempts WHERE delivery_id = :d ORDER BY id")
    return list(db.session.execute(sql, {"d": delivery_id}).scalars())


def device(user_id: int, platform: str):
    sql = sa.text("SELECT * FROM devices WHERE user_id = :u AND platform = :p")
    return db.session.execute(sql, {"u": user_id, "p": platform}).mappings().one()


@pytest.mark.committed
def test_one_row_reaches_the_browser_the_iphone_and_the_android_phone(app, vapid, push_service, apns, fcm):
    iphone = device_token()
    user = member_with_everything(push_service, iphone)
    note, delivery = push_row(user)

    counts = deliver_batch("push", [delivery.id])

    assert counts.get("sent") == 1, counts
    assert reload(delivery).status == "sent"
    assert attempt_providers(delivery.id) == ["webpush+apns+fcm"], apns.refused
    assert len(push_service.received) == 1 and push_service.received[0].payload["title"] == "Shipped"
    (ios,) = apns.received
    assert ios.token == iphone and ios.headers["apns-topic"] == "com.example.hato"
    assert ios.headers["apns-collapse-id"] == "order-42" and ios.headers["apns-priority"] == "10"
    aps = ios.payload["aps"]
    assert aps["alert"]["title"] == "Shipped" and aps["badge"] == 2 and aps["thread-id"] == "order-shipped"
    assert ios.payload["notification_id"] == note.id and ios.payload["link"].endswith("/orders/42")
    (android,) = fcm.received
    message = android.message
    assert android.token == ANDROID and message["notification"]["title"] == "Shipped"
    assert message["data"]["notification_id"] == str(note.id) and message["android"]["priority"] == "HIGH"
    assert message["android"]["collapse_key"] == "order-42"
    db.session.rollback()
    assert device(user.id, "ios")["last_sent_at"] is not None and device(user.id, "android")["last_sent_at"]


@pytest.mark.committed
def test_an_iphone_gets_the_alert_in_its_own_language(app, vapid, push_service, apns, fcm):
    user = member_with_everything(push_service, device_token(), locale="ja")
    _, delivery = push_row(user)
    db.session.add(MessageTemplate(type="order-shipped", channel="push", locale="ja", subject="発送しました",
                                   body_text="ご注文の品を発送しました"))  # fmt: skip
    db.session.commit()
    deliver_batch("push", [delivery.id])
    assert apns.received[0].payload["aps"]["alert"] == {"title": "発送しました", "body": "ご注文の品を発送しました"}
    assert fcm.received[0].message["notification"]["title"] == "Shipped"  # the member's own language: en
    assert push_service.received[0].payload["title"] == "Shipped"


@pytest.mark.committed
def test_a_gone_iphone_is_invalidated_and_the_others_still_count_it_sent(app, vapid, push_service, apns, fcm):
    iphone = device_token()
    user = member_with_everything(push_service, iphone)
    apns.script(iphone, Answer.unregistered(int(time.time() * 1000) + 5_000))
    _, delivery = push_row(user)

    assert deliver_batch("push", [delivery.id]).get("sent") == 1
    assert attempt_providers(delivery.id) == ["webpush+fcm"]
    db.session.rollback()
    gone = device(user.id, "ios")
    assert gone["invalidated_at"] is not None and gone["invalid_reason"] == "Unregistered"
    assert device(user.id, "android")["invalidated_at"] is None


@pytest.mark.committed
def test_a_410_from_before_the_phone_registered_again_leaves_it_valid(app, vapid, push_service, apns, fcm):
    iphone = device_token()
    user = member_with_everything(push_service, iphone)
    apns.script(iphone, Answer.unregistered(int((time.time() - 3600) * 1000)))
    _, delivery = push_row(user)
    deliver_batch("push", [delivery.id])
    db.session.rollback()
    assert device(user.id, "ios")["invalidated_at"] is None


@pytest.mark.committed
def test_a_phone_only_member_waits_while_apns_is_paused_and_goes_when_it_resumes(app, apns):
    from app.delivery import switches

    iphone = device_token()
    user = UserFactory()
    devices.register(user.id, {"platform": "ios", "token": iphone})
    _, delivery = push_row(user)
    switches.pause(None, "push", "apns", "APNs certificate rotation", app.config)
    db.session.commit()
    switches.forget()

    counts = deliver_batch("push", [delivery.id])
    assert counts.get("held") == 1 and apns.received == [], counts
    row = reload(delivery)
    assert row.status == "pending" and row.attempts == 0

    assert switches.release_resumed(app.config) == 0  # push is open (Web Push is not paused): still waits
    assert switches.waiting().get("push") == 1
    switches.resume(None, "push", "apns", app.config)
    db.session.commit()
    switches.forget()
    assert switches.release_resumed(app.config) == 1  # the sweeper's step, once nothing of push is paused
    assert deliver_batch("push", [delivery.id]).get("sent") == 1
    assert [push.token for push in apns.received] == [iphone]


@pytest.mark.committed
def test_a_slow_apns_does_not_hold_back_fcm_or_the_browser(app, vapid, push_service, apns, fcm):
    iphone = device_token()
    user = member_with_everything(push_service, iphone)
    apns.script(iphone, Answer.slow(2.0))
    _, delivery = push_row(user)

    def send() -> None:
        with app.app_context():
            deliver_batch("push", [delivery.id])

    sender = threading.Thread(target=send)
    sender.start()
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline and not (fcm.received and push_service.received):
        time.sleep(0.02)
    assert fcm.received and push_service.received and not apns.received  # side by side, not after APNs
    sender.join(15)
    assert [push.token for push in apns.received] == [iphone]


@pytest.mark.committed
def test_a_member_with_only_a_phone_is_not_skipped_at_birth(app, apns):
    from app.notify.service import notify  # noqa: F401 - the ingest's born_skip SQL is what is checked

    user = UserFactory()
    devices.register(user.id, {"platform": "ios", "token": device_token()})
    db.session.commit()
    from app.delivery.channels import channel_for

    condition, _ = channel_for("push").born_skip
    sql = sa.text(f"SELECT {condition} FROM (SELECT CAST(:u AS bigint) AS user_id) AS i")
    assert db.session.execute(sql, {"u": user.id}).scalar() is False


@pytest.mark.committed
def test_the_phone_variant_goes_to_phones_and_the_browser_keeps_its_own(app, vapid, push_service, apns, fcm):
    user = member_with_everything(push_service, device_token(), locale="en")
    _, delivery = push_row(user)
    template = MessageTemplate(type="order-shipped", channel="push", locale="en", body_text="Browser text",
                               subject="Shipped: {{ notification.title }}", mobile_title="📦 {{ notification.title }}",
                               mobile_subtitle="Order 42", mobile_body="")  # fmt: skip
    db.session.add(template)
    db.session.commit()
    deliver_batch("push", [delivery.id])
    assert apns.received[0].payload["aps"]["alert"] == {"title": "📦 Shipped", "subtitle": "Order 42",
                                                        "body": "Browser text"}  # fmt: skip
    assert fcm.received[0].message["notification"] == {"title": "📦 Shipped", "body": "Browser text"}
    assert push_service.received[0].payload["title"] == "Shipped: Shipped"


def reached(delivery_id: int) -> list[str] | None:
    sql = sa.text("SELECT reached FROM notification_deliveries WHERE id = :d")
    return db.session.execute(sql, {"d": delivery_id}).scalar_one()


@pytest.mark.committed
def test_a_phone_that_failed_for_now_gets_it_on_the_retry_and_the_others_not_twice(app, vapid, push_service, apns,
                                                                                    fcm):  # fmt: skip
    iphone = device_token()
    user = member_with_everything(push_service, iphone)
    fcm.script(ANDROID, "UNAVAILABLE", retry_after="1", times=1)
    _, delivery = push_row(user)

    assert deliver_batch("push", [delivery.id]).get("pending") == 1
    row = reload(delivery)
    assert row.status == "pending" and row.attempts == 1 and row.sent_at is None
    assert sorted(reached(delivery.id)) == sorted([iphone, push_service.received[0].endpoint])
    assert attempt_providers(delivery.id) == ["webpush+apns"]
    assert (row.next_attempt_at - row.updated_at).total_seconds() >= 1  # FCM's Retry-After for the phone

    time.sleep(1.1)  # FCM's scope is paused for its Retry-After too
    db.session.execute(sa.text("UPDATE notification_deliveries SET next_attempt_at = now() WHERE id = :d"),
                       {"d": delivery.id})  # fmt: skip
    db.session.commit()
    assert deliver_batch("push", [delivery.id]).get("sent") == 1
    assert reload(delivery).status == "sent"
    assert attempt_providers(delivery.id) == ["webpush+apns", "fcm"]
    assert [p.token for p in fcm.received] == [ANDROID]
    assert len(apns.received) == 1 and len(push_service.received) == 1  # nobody got it twice


@pytest.mark.committed
def test_a_paused_part_gets_the_message_when_resumed_while_the_others_get_it_now(app, vapid, push_service, apns, fcm):
    from app.delivery import switches

    iphone = device_token()
    user = member_with_everything(push_service, iphone)
    _, delivery = push_row(user)
    switches.pause(None, "push", "apns", "APNs key rotation", app.config)
    db.session.commit()
    switches.forget()

    assert deliver_batch("push", [delivery.id]).get("pending") == 1
    assert apns.received == [] and [p.token for p in fcm.received] == [ANDROID] and len(push_service.received) == 1
    assert reload(delivery).status == "pending"

    switches.resume(None, "push", "apns", app.config)
    db.session.commit()
    switches.forget()
    assert switches.release_resumed(app.config) == 1
    assert deliver_batch("push", [delivery.id]).get("sent") == 1
    assert [p.token for p in apns.received] == [iphone]
    assert len(fcm.received) == 1 and len(push_service.received) == 1


@pytest.mark.committed
def test_a_row_whose_waiting_phone_was_removed_counts_as_sent(app, vapid, push_service, apns, fcm):
    iphone = device_token()
    user = member_with_everything(push_service, iphone)
    fcm.script(ANDROID, "UNAVAILABLE", times=1)
    _, delivery = push_row(user)
    deliver_batch("push", [delivery.id])
    devices.remove(user.id, ANDROID)
    db.session.execute(sa.text("UPDATE notification_deliveries SET next_attempt_at = now() WHERE id = :d"),
                       {"d": delivery.id})  # fmt: skip
    db.session.commit()

    assert deliver_batch("push", [delivery.id]).get("sent") == 1
    row = reload(delivery)
    assert row.status == "sent" and row.sent_at is not None and row.attempts == 1
    assert len(apns.received) == 1 and fcm.received == []
