"""The SMS channel through the engine to a local Twilio (issue 29): who gets one, its text, and what refusals change."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import MessageTemplate
from app.providers.httpclients import close_all
from jobs.delivery import deliver_batch
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.delivery import reload
from tests.support.twilio_server import serving_app

PHONE = "+819012345678"


@pytest.fixture
def twilio(app, monkeypatch):
    with serving_app(app, monkeypatch) as server:
        yield server


def member(phone: str | None = PHONE, verified: bool = True, consent: bool = True, locale: str = "en"):
    now = datetime.now(UTC)
    return UserFactory(phone=phone, phone_verified_at=now if verified else None, sms_opt_in=consent, locale=locale)


def sms_row(user, title: str = "Sign-in code", body: str = "Your code is 482910", max_segments: int = 3):
    kind = NotificationTypeFactory(type="sign-in", label="Sign-in", default_channels=["sms"], priority="high",
                                   sms_max_segments=max_segments)  # fmt: skip
    note = NotificationFactory(user_id=user.id, type=kind.type, title=title, body=body, link_path="/security")
    delivery = DeliveryFactory(notification_id=note.id, channel="sms")
    db.session.commit()
    return delivery


@pytest.mark.committed
def test_an_sms_goes_to_the_verified_number_with_the_title_body_and_an_absolute_link(app, twilio):
    delivery = sms_row(member())

    assert deliver_batch("sms", [delivery.id]).get("sent") == 1
    (message,) = twilio.received
    assert message.to == PHONE
    assert message.body == f"Sign-in code\nYour code is 482910\n{app.config['BASE_URL']}/security"
    row = reload(delivery)
    assert (row.status, row.provider, row.provider_message_id) == ("sent", "twilio", message.sid)


@pytest.mark.committed
def test_the_template_speaks_the_members_language_and_japanese_goes_as_ucs2(app, twilio):
    delivery = sms_row(member(locale="ja"))
    db.session.add(MessageTemplate(type="sign-in", channel="sms", locale="ja", subject="",
                                   body_text="認証コードは {{ notification.body[-6:] }} です。"))  # fmt: skip
    db.session.commit()

    deliver_batch("sms", [delivery.id])
    assert [m.body for m in twilio.received] == ["認証コードは 482910 です。"]


@pytest.mark.committed
@pytest.mark.parametrize(
    "kwargs, reason",
    [({"phone": None}, "no_sms_number"), ({"verified": False}, "sms_number_unverified"),
     ({"consent": False}, "no_sms_consent")],
)  # fmt: skip
def test_no_number_an_unverified_one_or_no_consent_is_skipped_and_sends_nothing(app, twilio, kwargs, reason):
    delivery = sms_row(member(**kwargs))

    assert deliver_batch("sms", [delivery.id]).get("skipped") == 1
    row = reload(delivery)
    assert (row.status, row.skip_reason) == ("skipped", reason) and twilio.received == []


@pytest.mark.committed
def test_a_text_over_the_types_parts_fails_for_good_without_a_send(app, twilio):
    delivery = sms_row(member(), body="あ" * 140, max_segments=2)  # UCS-2: 140 + the title > 2 × 67

    deliver_batch("sms", [delivery.id])
    row = reload(delivery)
    assert (row.status, row.error_kind) == ("failed", "render") and "allows 2" in row.last_error
    assert twilio.received == []


@pytest.mark.committed
def test_a_number_twilio_calls_invalid_is_marked_and_gets_no_more_sms(app, twilio):
    user = member()
    twilio.script(PHONE, 21211)
    delivery = sms_row(user)

    deliver_batch("sms", [delivery.id])
    assert (reload(delivery).status, reload(delivery).error_kind) == ("failed", "invalid_number")
    db.session.rollback()
    row = db.session.execute(sa.text("SELECT * FROM users WHERE id = :u"), {"u": user.id}).mappings().one()
    assert row["phone_invalidated_at"] is not None and "21211" in row["phone_invalid_reason"]


@pytest.mark.committed
def test_an_unsubscribed_recipient_withdraws_their_consent_on_record(app, twilio):
    user = member()
    twilio.script(PHONE, 21610)
    deliver_batch("sms", [sms_row(user).id])

    db.session.rollback()
    row = db.session.execute(sa.text("SELECT * FROM users WHERE id = :u"), {"u": user.id}).mappings().one()
    assert row["sms_opt_in"] is False and row["sms_consent_source"] == "keyword"
    consents = db.session.execute(sa.text("SELECT opted_in, source FROM sms_consents WHERE user_id = :u"),
                                  {"u": user.id}).all()  # fmt: skip
    assert [tuple(c) for c in consents] == [(False, "keyword")]


@pytest.mark.committed
def test_twilio_down_is_a_retry_not_a_failure(app, twilio):
    twilio.script(PHONE, 20503, times=1)
    delivery = sms_row(member())

    assert deliver_batch("sms", [delivery.id]).get("pending") == 1
    assert (reload(delivery).status, reload(delivery).attempts) == ("pending", 1)


@pytest.mark.committed
def test_twilio_down_fails_over_to_vonage_and_nobody_gets_it_twice(app, twilio, monkeypatch):
    from tests.support.vonage_server import VonageServer

    with VonageServer() as vonage:
        for name, value in {**vonage.settings(), "SMS_PROVIDER": "twilio,vonage", "BREAKER_FAILURES": 1}.items():
            monkeypatch.setitem(app.config, name, value)
        twilio.script(PHONE, 20503)  # Twilio answers 503 to everything for this number
        user = member()
        first = sms_row(user, title="First")
        note = NotificationFactory(user_id=user.id, type="sign-in", title="Second", body="Your code is 771204")
        second = DeliveryFactory(notification_id=note.id, channel="sms")
        db.session.commit()

        deliver_batch("sms", [first.id, second.id])  # the first fails on Twilio and opens its breaker
        assert (reload(first).status, reload(second).status) == ("pending", "sent")
        db.session.execute(sa.text("UPDATE notification_deliveries SET next_attempt_at = now() WHERE id = :d"),
                           {"d": first.id})  # fmt: skip
        db.session.commit()
        deliver_batch("sms", [first.id])
        close_all()

    assert reload(first).status == "sent" and reload(first).provider == "vonage"
    assert sorted(m.text.split("\n")[0] for m in vonage.received) == ["First", "Second"]  # each once, by Vonage
    assert twilio.received == []
