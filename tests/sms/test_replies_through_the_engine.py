"""Status and replies end to end (issue 29 items 3 and 8): the stand-ins post to a running Hato, the engine obeys.

Twilio's stand-in posts the status callbacks of each message to the StatusCallback Hato named (BASE_URL +
/hooks/providers/twilio) and an incoming STOP to the inbound hook, signed as Twilio signs them; Vonage's posts its
signed status webhooks to the application's Status URL and the STOP to its Inbound URL. Sends go through the
delivery engine (jobs/delivery.py) as tests/delivery/test_sms_channel.py drives it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.providers.httpclients import close_all
from jobs.delivery import deliver_batch
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.sms.conftest import PHONE, consents
from tests.support.delivery import reload
from tests.support.twilio_server import TwilioServer
from tests.support.vonage_server import VonageServer


@pytest.fixture
def hato(app, live_server, monkeypatch):
    """A running Hato whose public URL is BASE_URL for the sender too (its StatusCallback points there)."""
    monkeypatch.setitem(app.config, "BASE_URL", live_server.base_url)
    return live_server


def _configure(apps, settings: dict, monkeypatch) -> None:
    for target in apps:
        for name, value in settings.items():
            monkeypatch.setitem(target.config, name, value)


@pytest.fixture
def twilio(app, hato, monkeypatch):
    with TwilioServer(callback_delay=0.02) as server:
        _configure((app, hato), {**server.settings(), "SMS_PROVIDER": "twilio"}, monkeypatch)
        yield server
    close_all()


@pytest.fixture
def vonage(app, hato, monkeypatch):
    with VonageServer(status_url=hato.base_url + "/hooks/providers/vonage") as server:
        _configure((app, hato), {**server.settings(), "SMS_PROVIDER": "vonage"}, monkeypatch)
        yield server
    close_all()


def sms_member():
    return UserFactory(phone=PHONE, phone_verified_at=datetime.now(UTC), sms_opt_in=True)


def sms_row(user, title: str = "Sign-in code"):
    NotificationTypeFactory(type="sign-in", label="Sign-in", default_channels=["sms"], priority="high")
    note = NotificationFactory(user_id=user.id, type="sign-in", title=title, body="Your code is 482910")
    delivery = DeliveryFactory(notification_id=note.id, channel="sms")
    db.session.commit()
    return delivery


def provider_status(delivery) -> str | None:
    db.session.rollback()
    return reload(delivery).provider_status


@pytest.mark.committed
@pytest.mark.parametrize("final, shown", [("delivered", "delivered"), ("undelivered", "undelivered")])
def test_twilios_callbacks_reach_the_delivery_log(twilio, final, shown):
    twilio.script(PHONE, final=final)
    delivery = sms_row(sms_member())

    assert deliver_batch("sms", [delivery.id]).get("sent") == 1
    (message,) = twilio.received
    assert message.status_callback.endswith("/hooks/providers/twilio")
    twilio.wait_callbacks()
    assert [c.status for c in twilio.callbacks_for(message.sid)] == [200, 200]  # sent, then the final state
    assert provider_status(delivery) == shown


@pytest.mark.committed
def test_stop_through_twilio_stops_the_engine_until_start(app, client, twilio, hato):
    from app.api_keys.scopes import SCOPES
    from app.api_keys.service import create_api_key
    from tests.api.conftest import Api

    user = sms_member()
    db.session.commit()
    inbound = hato.base_url + "/hooks/providers/twilio/inbound"

    status, answer = twilio.inbound(inbound, PHONE, "STOP")
    assert status == 200 and answer.endswith("<Response />")
    first = sms_row(user, "After STOP")
    assert deliver_batch("sms", [first.id]).get("skipped") == 1
    assert twilio.received == []
    db.session.rollback()
    assert consents(user) == [(False, "keyword")]

    # The product opts the member in again: the number said STOP, so it still gets nothing.
    api = Api(client, create_api_key(None, "tests", SCOPES))
    db.session.commit()
    assert api.put(f"/v1/users/{user.external_id}", {"sms_opt_in": True}).status_code == 200
    again = sms_row(user, "After the API")
    assert deliver_batch("sms", [again.id]).get("skipped") == 1
    assert reload(again).skip_reason == "sms_number_stopped" and twilio.received == []

    status, answer = twilio.inbound(inbound, PHONE, "START")
    assert status == 200
    last = sms_row(user, "After START")
    assert deliver_batch("sms", [last.id]).get("sent") == 1
    assert [m.body.split("\n")[0] for m in twilio.received] == ["After START"]


@pytest.mark.committed
def test_help_through_twilio_answers_twiml(twilio, hato):
    status, answer = twilio.inbound(hato.base_url + "/hooks/providers/twilio/inbound", PHONE, "HELP")
    assert status == 200 and f"<Message>{hato.config['SMS_HELP_TEXT']}</Message>" in answer


@pytest.mark.committed
def test_vonages_status_webhooks_reach_the_delivery_log(vonage):
    vonage.script(PHONE[1:], final="rejected", final_error="1330")
    delivery = sms_row(sms_member())

    assert deliver_batch("sms", [delivery.id]).get("sent") == 1
    hooks = vonage.wait_webhooks(2)
    assert [h.status for h in hooks] == [200, 200]
    assert provider_status(delivery) == "failed"


@pytest.mark.committed
def test_stop_through_vonage_stops_the_engine(vonage, hato):
    user = sms_member()
    db.session.commit()

    status, _ = vonage.inbound(hato.base_url + "/hooks/providers/vonage/inbound", PHONE[1:], "停止")
    assert status == 200
    delivery = sms_row(user)
    assert deliver_batch("sms", [delivery.id]).get("skipped") == 1
    assert vonage.received == []
    db.session.rollback()
    assert consents(user) == [(False, "keyword")]
    assert db.session.execute(sa.text("SELECT provider FROM sms_suppressions")).scalars().all() == ["vonage"]
