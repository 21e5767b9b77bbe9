"""What each provider event does to its delivery, the suppression list and preferences; unknown ids and resends."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import EmailSuppression, NotificationPreference
from tests.factories import NotificationTypeFactory
from tests.hooks.conftest import (
    count,
    events_of,
    mailgun_body,
    postmark_body,
    sendgrid_events,
)
from tests.support.delivery import reload

SENDGRID = "/hooks/providers/sendgrid"
MAILGUN = "/hooks/providers/mailgun"
POSTMARK = "/hooks/providers/postmark"


@pytest.fixture
def post(client, sendgrid, mailgun, postmark):
    """Post one event about message_id the given provider's way, signed; return the JSON answer."""

    def _post(provider: str, message_id: str, kind: str, **fields):
        if provider == "sendgrid":
            body = sendgrid_events(message_id, {"event": kind, **fields})
            response = client.post(SENDGRID, data=body, headers=sendgrid.headers(body))
        elif provider == "mailgun":
            response = client.post(
                MAILGUN, data=mailgun_body(message_id, event=kind, **fields), content_type="application/json"
            )
        else:
            response = client.post(POSTMARK, data=postmark_body(message_id, kind, **fields), headers=postmark)
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.get_json()

    return _post


# (provider, the provider's event, its fields) → Hato's event
DELIVERED = [("sendgrid", "delivered", {}), ("mailgun", "delivered", {}), ("postmark", "Delivery", {})]
HARD = [
    ("sendgrid", "bounce", {"type": "bounce", "reason": "550 5.1.1 unknown user", "status": "5.1.1"}),
    ("sendgrid", "dropped", {"reason": "Bounced Address"}),
    ("mailgun", "failed", {"severity": "permanent", "reason": "bounce"}),
    ("postmark", "Bounce", {}),
]
SOFT = [
    ("sendgrid", "bounce", {"type": "blocked", "reason": "421 try later"}),
    ("mailgun", "failed", {"severity": "temporary", "reason": "generic"}),
    ("postmark", "Bounce", {"Type": "SoftBounce", "TypeCode": 4096, "ID": 77}),
]
COMPLAINED = [("sendgrid", "spamreport", {}), ("mailgun", "complained", {}), ("postmark", "SpamComplaint", {})]
OPENED = [("sendgrid", "open", {"useragent": "Mozilla/5.0"}), ("mailgun", "opened", {}), ("postmark", "Open", {})]
CLICKED = [
    ("sendgrid", "click", {"url": "https://example.com/inbox"}),
    ("mailgun", "clicked", {"url": "https://example.com/inbox"}),
    ("postmark", "Click", {}),
]


def _id(case):
    return f"{case[0]}-{case[1]}"


@pytest.mark.parametrize("case", DELIVERED, ids=_id)
def test_delivered_marks_the_delivery_delivered(post, sent, case):
    provider, kind, fields = case
    delivery = sent()

    assert post(provider, delivery.provider_message_id, kind, **fields)["recorded"] == 1

    row = reload(delivery)
    assert (row.status, row.provider_status) == ("sent", "delivered")
    assert row.provider_status_at is not None
    assert events_of(delivery) == [(provider, "delivered")]
    assert count("email_suppressions") == 0


@pytest.mark.parametrize("case", HARD, ids=_id)
def test_a_hard_bounce_suppresses_the_address(post, sent, case):
    provider, kind, fields = case
    delivery = sent()

    post(provider, delivery.provider_message_id, kind, **fields)

    assert reload(delivery).provider_status == "bounced"
    assert events_of(delivery) == [(provider, "bounced")]
    suppression = db.session.get(EmailSuppression, "alice@example.com")
    assert suppression is not None and suppression.reason == "bounce"
    assert suppression.detail.startswith(provider)


@pytest.mark.parametrize("case", SOFT, ids=_id)
def test_a_soft_bounce_is_recorded_only(post, sent, case):
    provider, kind, fields = case
    delivery = sent()

    post(provider, delivery.provider_message_id, kind, **fields)

    assert reload(delivery).provider_status is None
    assert events_of(delivery) == [(provider, "soft_bounced")]
    assert count("email_suppressions") == 0


@pytest.mark.parametrize("case", COMPLAINED, ids=_id)
def test_a_complaint_suppresses_and_turns_off_that_users_email(post, sent, alice, email_type, case):
    provider, kind, fields = case
    off_by_default = NotificationTypeFactory(type="digest-tips", default_email=False)
    security = NotificationTypeFactory(type="security", default_email=True, mandatory=True)
    db.session.add(NotificationPreference(user_id=alice.id, type=off_by_default.type, channel="email", enabled=True))
    delivery = sent()

    post(provider, delivery.provider_message_id, kind, **fields)

    assert reload(delivery).provider_status == "complained"
    assert db.session.get(EmailSuppression, "alice@example.com").reason == "complaint"
    prefs = {
        row.type: row.enabled
        for row in db.session.execute(
            sa.select(NotificationPreference).where(
                NotificationPreference.user_id == alice.id, NotificationPreference.channel == "email"
            )
        ).scalars()
    }
    # comment (on by default) is now off; the opt-in to an off-by-default type is gone; mandatory untouched.
    assert prefs == {email_type.type: False}
    assert security.type not in prefs


@pytest.mark.parametrize("case", OPENED + CLICKED, ids=_id)
def test_opens_and_clicks_are_recorded(post, sent, case):
    provider, kind, fields = case
    delivery = sent()
    reload(delivery).provider_status = "delivered"
    db.session.flush()

    post(provider, delivery.provider_message_id, kind, **fields)

    assert reload(delivery).provider_status == "delivered"
    expected = "opened" if kind.lower().startswith("open") else "clicked"
    assert events_of(delivery) == [(provider, expected)]


def test_the_status_never_goes_down_whatever_order_events_arrive_in(post, sent):
    delivery = sent()
    post("mailgun", delivery.provider_message_id, "complained")
    post("mailgun", delivery.provider_message_id, "delivered")
    assert reload(delivery).provider_status == "complained"
    assert [event for _, event in events_of(delivery)] == ["complained", "delivered"]


def test_message_ids_match_with_or_without_angle_brackets(post, sent):
    bracketed = sent("<delivery-7@hato.example>")
    # Mailgun drops the brackets; SendGrid's smtp-id keeps them.
    post("mailgun", "delivery-7@hato.example", "delivered")
    assert reload(bracketed).provider_status == "delivered"


def test_an_unknown_message_id_is_counted_never_an_error(post, sent, client):
    sent()
    answer = post("sendgrid", "<nobody-sent-this@elsewhere.example>", "bounce", type="bounce")

    assert answer == {"received": 1, "recorded": 1, "duplicates": 0, "unknown": 1, "ignored": 0}
    assert count("provider_events", "delivery_id IS NULL") == 1
    assert count("email_suppressions") == 0  # nothing of ours bounced
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'hato_provider_events_total{event="bounced",matched="false",provider="sendgrid"} 1.0' in metrics


def test_a_resent_event_counts_once(client, sendgrid, sent):
    delivery = sent()
    body = sendgrid_events(delivery.provider_message_id, {"event": "bounce", "type": "bounce", "sg_event_id": "e-1"})

    first = client.post(SENDGRID, data=body, headers=sendgrid.headers(body)).get_json()
    again = client.post(SENDGRID, data=body, headers=sendgrid.headers(body)).get_json()  # SendGrid retries

    assert (first["recorded"], again["recorded"], again["duplicates"]) == (1, 0, 1)
    assert events_of(delivery) == [("sendgrid", "bounced")]
    assert count("email_suppressions") == 1


def test_postmark_events_without_an_id_are_told_apart_by_their_content(post, sent):
    delivery = sent()
    assert post("postmark", delivery.provider_message_id, "Open")["recorded"] == 1
    assert post("postmark", delivery.provider_message_id, "Open")["duplicates"] == 1  # the same post again
    assert post("postmark", delivery.provider_message_id, "Open", ReadSeconds=9)["recorded"] == 1


def test_a_sendgrid_batch_mixes_kinds_and_ignores_what_hato_does_not_track(client, sendgrid, sent):
    delivery = sent()
    body = sendgrid_events(
        delivery.provider_message_id,
        {"event": "processed"},
        {"event": "deferred", "response": "400 try again later", "attempt": "1"},
        {"event": "delivered", "response": "250 OK"},
        {"event": "open", "useragent": "Mozilla/5.0", "ip": "255.255.255.255"},
        {"event": "group_unsubscribe", "asm_group_id": 10},
    )

    answer = client.post(SENDGRID, data=body, headers=sendgrid.headers(body)).get_json()

    assert answer == {"received": 2, "recorded": 2, "duplicates": 0, "unknown": 0, "ignored": 3}
    assert [event for _, event in events_of(delivery)] == ["delivered", "opened"]


def test_sendgrid_matches_on_its_own_message_id_too(client, sendgrid, sent):
    # Sent through SendGrid's API, the ledger holds its X-Message-Id; the event's sg_message_id extends it.
    delivery = sent("14c5d75ce93.dfd.64b469")
    body = sendgrid_events("<unrelated@example>", {"event": "delivered"})

    client.post(SENDGRID, data=body, headers=sendgrid.headers(body))

    assert reload(delivery).provider_status == "delivered"
