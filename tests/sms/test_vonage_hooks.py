"""Vonage's signed status and inbound webhooks (issue 29 item 3): the JWT, its payload hash and age; once; keywords."""

from __future__ import annotations

import hashlib
import json
import time
import uuid

import jwt
import pytest
import sqlalchemy as sa

from app.extensions import db
from tests.sms.conftest import (
    PHONE,
    VONAGE_INBOUND,
    VONAGE_STATUS,
    consents,
    count,
    member,
    reachable,
    snapshot,
    user_row,
)
from tests.support.delivery import reload


def _token(secret: str, body: bytes, **claims) -> str:
    base = {"iat": int(time.time()), "jti": str(uuid.uuid4()), "iss": "Vonage",
            "payload_hash": hashlib.sha256(body).hexdigest()}  # fmt: skip
    return jwt.encode({**base, **claims}, secret, algorithm="HS256")


@pytest.mark.parametrize("how", ["missing", "wrong secret", "another body", "too old", "no payload hash", "basic"])
def test_a_webhook_vonage_did_not_sign_is_401_and_changes_nothing(vonage_hook, sent_sms, how):
    delivery = sent_sms(member(), provider="vonage", message_id=str(uuid.uuid4()))
    payload = {"message_uuid": delivery.provider_message_id, "to": PHONE[1:], "status": "rejected",
               "channel": "sms", "error": {"title": "1240", "detail": "Illegal Number"}}  # fmt: skip
    body = json.dumps(payload).encode()
    secret = vonage_hook.server.application.signature_secret
    token = {
        "missing": "",
        "wrong secret": _token("x" * 43, body),
        "another body": _token(secret, b'{"status": "delivered"}'),
        "too old": _token(secret, body, iat=int(time.time()) - 3600),
        "no payload hash": jwt.encode({"iat": int(time.time())}, secret, algorithm="HS256"),
        "basic": None,
    }[how]
    before = snapshot()
    if token is None:
        response = vonage_hook.client.post(VONAGE_STATUS, data=body, content_type="application/json",
                                           headers={"Authorization": "Basic dXNlcjpwYXNz"})  # fmt: skip
    else:
        response = vonage_hook.post(VONAGE_STATUS, payload, token=token, body=body)
    assert response.status_code == 401 and response.mimetype == "application/problem+json"
    assert snapshot() == before


@pytest.mark.parametrize("path", [VONAGE_STATUS, VONAGE_INBOUND])
def test_without_a_signature_secret_the_hooks_are_not_here(client, path):
    response = client.post(path, json={"message_uuid": str(uuid.uuid4()), "status": "delivered"})
    assert response.status_code == 404 and response.mimetype == "application/problem+json"


def test_statuses_rise_once_each_and_unknown_ids_are_counted(vonage_hook, sent_sms):
    delivery = sent_sms(member(), provider="vonage", message_id=str(uuid.uuid4()))
    message_id = delivery.provider_message_id

    assert vonage_hook.status(message_id, "submitted").get_json()["recorded"] == 1
    assert reload(delivery).provider_status == "sent"
    assert vonage_hook.status(message_id, "delivered").get_json()["recorded"] == 1
    assert vonage_hook.status(message_id, "delivered").get_json()["duplicates"] == 1
    assert vonage_hook.status(message_id, "submitted").get_json()["duplicates"] == 1
    assert reload(delivery).provider_status == "delivered"
    unknown = vonage_hook.status(str(uuid.uuid4()), "delivered").get_json()
    assert (unknown["recorded"], unknown["unknown"]) == (1, 1)


def test_undeliverable_is_final_with_its_error(vonage_hook, sent_sms):
    delivery = sent_sms(member(), provider="vonage", message_id=str(uuid.uuid4()))
    vonage_hook.status(delivery.provider_message_id, "undeliverable", "1331")
    vonage_hook.status(delivery.provider_message_id, "delivered")

    assert reload(delivery).provider_status == "undelivered"
    detail = db.session.execute(
        sa.text("SELECT detail FROM provider_events WHERE delivery_id = :d AND event = 'undelivered'"),
        {"d": delivery.id},
    ).scalar_one()
    assert detail["error_code"] == "1331" and detail["reason"] == "Illegal Number"


def test_rejected_1240_withdraws_consent_and_1170_marks_the_number_invalid(vonage_hook, sent_sms):
    stopped, invalid = member(), member(phone="+819011112222")
    vonage_hook.status(sent_sms(stopped, "vonage", str(uuid.uuid4())).provider_message_id, "rejected", "1240")
    vonage_hook.status(sent_sms(invalid, "vonage", str(uuid.uuid4())).provider_message_id, "rejected", "1170",
                       to="819011112222")  # fmt: skip

    assert user_row(stopped)["sms_opt_in"] is False and consents(stopped) == [(False, "keyword")]
    assert user_row(invalid)["phone_invalidated_at"] is not None
    assert count("email_suppressions") == 0


def test_another_channels_status_is_ignored(vonage_hook):
    payload = {"message_uuid": str(uuid.uuid4()), "status": "delivered", "channel": "whatsapp", "to": PHONE[1:]}
    assert vonage_hook.post(VONAGE_STATUS, payload).get_json()["ignored"] == 1
    assert count("provider_events") == 0


@pytest.mark.parametrize("text", ["STOP", "停止", " unsubscribe "])
def test_stop_suppresses_the_number_and_start_restores_it(vonage_hook, text):
    user = member()
    answer = vonage_hook.inbound(text)
    assert answer.status_code == 200 and answer.get_json() == {"keyword": "stop", "answered": False}
    assert not reachable(user) and consents(user) == [(False, "keyword")]
    assert count("sms_suppressions", "phone = :p AND provider = 'vonage'", p=PHONE) == 1

    assert vonage_hook.inbound("START").get_json()["keyword"] == "start"
    assert reachable(user) and consents(user) == [(False, "keyword"), (True, "keyword")]


def test_help_is_answered_by_an_sms_through_vonage(app, vonage_hook, monkeypatch):
    monkeypatch.setitem(app.config, "SMS_HELP_TEXT", "Hato: reply STOP to stop, START to start again.")
    user = member()

    answer = vonage_hook.inbound("Help")
    assert answer.get_json() == {"keyword": "help", "answered": True}
    (sms,) = vonage_hook.server.received_by(PHONE[1:])
    assert (
        sms.text == "Hato: reply STOP to stop, START to start again."
        and sms.from_ == vonage_hook.server.application.number
    )
    assert reachable(user)


def test_help_when_vonage_cannot_send_is_still_a_200(app, vonage_hook, monkeypatch):
    monkeypatch.setitem(app.config, "VONAGE_FROM", "")  # the hook is on (signature secret), sending is not
    assert vonage_hook.inbound("HELP").get_json() == {"keyword": "help", "answered": False}
    assert vonage_hook.server.received == []


def test_an_inbound_message_vonage_did_not_sign_changes_nothing(vonage_hook):
    member()
    before = snapshot()
    assert vonage_hook.inbound("STOP", token=_token("y" * 43, b"{}")).status_code == 401
    assert snapshot() == before
