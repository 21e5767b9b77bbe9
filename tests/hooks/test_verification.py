"""Each provider's own authentication, checked before anything is read: refusals are 401/403 and change nothing."""

from __future__ import annotations

import base64
import json
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from tests.hooks.conftest import (
    mailgun_body,
    mailgun_signature,
    postmark_auth,
    postmark_body,
    sendgrid_events,
    snapshot,
)

SENDGRID = "/hooks/providers/sendgrid"
MAILGUN = "/hooks/providers/mailgun"
POSTMARK = "/hooks/providers/postmark"


def assert_refused(response, status: int, before: tuple):
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["status"] == status
    assert snapshot() == before


# --- SendGrid ---------------------------------------------------------------------------------------


def test_sendgrid_accepts_its_signature_and_records_the_events(client, sendgrid, sent):
    delivery = sent()
    body = sendgrid_events(delivery.provider_message_id, {"event": "delivered", "response": "250 OK"})

    response = client.post(SENDGRID, data=body, headers=sendgrid.headers(body))

    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json() == {"received": 1, "recorded": 1, "duplicates": 0, "unknown": 0, "ignored": 0}


@pytest.mark.parametrize(
    "tamper",
    [
        "unsigned",
        "no_timestamp",
        "body_changed",
        "timestamp_changed",
        "other_key",
        "garbage_signature",
        "old_timestamp",
        "future_timestamp",
    ],
)
def test_sendgrid_refuses_what_it_did_not_sign_or_sent_long_ago(client, sendgrid, sent, tamper):
    delivery = sent()
    body = sendgrid_events(delivery.provider_message_id, {"event": "bounce", "type": "bounce", "reason": "550"})
    headers = sendgrid.headers(body)
    status = 403
    if tamper == "unsigned":
        headers = {"Content-Type": "application/json"}
        status = 401
    elif tamper == "no_timestamp":
        del headers["X-Twilio-Email-Event-Webhook-Timestamp"]
        status = 401
    elif tamper == "body_changed":
        body = body.replace(b'"bounce"', b'"delivered"', 1)
    elif tamper == "timestamp_changed":
        headers["X-Twilio-Email-Event-Webhook-Timestamp"] = str(int(time.time()) - 1)
    elif tamper == "other_key":
        headers = sendgrid.headers(body, key=ec.generate_private_key(ec.SECP256R1()))
    elif tamper == "garbage_signature":
        headers["X-Twilio-Email-Event-Webhook-Signature"] = base64.b64encode(b"x" * 70).decode()
    elif tamper == "old_timestamp":  # a captured request, replayed later with its own valid signature
        headers = sendgrid.headers(body, timestamp=int(time.time()) - 3600)
    elif tamper == "future_timestamp":
        headers = sendgrid.headers(body, timestamp=int(time.time()) + 3600)
    before = snapshot()

    assert_refused(client.post(SENDGRID, data=body, headers=headers), status, before)


def test_a_bad_signature_is_refused_before_the_body_is_read(client, sendgrid):
    body = b"this is not json"
    headers = sendgrid.headers(b"something else")
    assert client.post(SENDGRID, data=body, headers=headers).status_code == 403
    # Signed, but not what SendGrid sends: 400, still nothing recorded.
    assert client.post(SENDGRID, data=body, headers=sendgrid.headers(body)).status_code == 400


@pytest.mark.parametrize(
    ("body", "field", "english"),
    [
        (b'{"event": "delivered"}', "body", "Input should be a valid list"),
        (b'[{"event": "delivered"}, 7]', "1", "Input should be an object"),  # the second event
    ],
)
def test_a_signed_body_of_another_shape_names_the_field_in_the_readers_language(client, sendgrid, body, field, english):
    before = snapshot()
    answers = [
        client.post(SENDGRID, data=body, headers={**sendgrid.headers(body), "Accept-Language": language})
        for language in ("en", "ja")
    ]
    for response in answers:
        assert_refused(response, 400, before)
    (in_english,), (in_japanese,) = (response.get_json()["errors"] for response in answers)
    assert in_english["field"] == in_japanese["field"] == field
    assert in_english["message"] == english
    assert in_japanese["message"] not in ("", english)  # the same rule, said in Japanese


# --- Mailgun ----------------------------------------------------------------------------------------


def test_mailgun_accepts_its_signature(client, mailgun, sent):
    delivery = sent()
    response = client.post(MAILGUN, data=mailgun_body(delivery.provider_message_id), content_type="application/json")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json()["recorded"] == 1


@pytest.mark.parametrize("tamper", ["unsigned", "wrong_key", "changed_token", "old_timestamp", "not_json"])
def test_mailgun_refuses_bad_or_old_signatures(client, mailgun, sent, tamper):
    delivery = sent()
    signature = mailgun_signature()
    status = 403
    if tamper == "unsigned":
        body = json.dumps({"event-data": json.loads(mailgun_body(delivery.provider_message_id))["event-data"]})
        status = 401
    else:
        if tamper == "wrong_key":
            signature = mailgun_signature(key="key-" + "0" * 32)
        elif tamper == "changed_token":
            signature = {**signature, "token": signature["token"][:-1] + "x"}
        elif tamper == "old_timestamp":
            signature = mailgun_signature(timestamp=int(time.time()) - 3600)
        body = mailgun_body(delivery.provider_message_id, signature, event="failed", severity="permanent")
    if tamper == "not_json":
        body, status = b"timestamp=1&token=2&signature=3", 401
    before = snapshot()

    assert_refused(client.post(MAILGUN, data=body, content_type="application/json"), status, before)


def test_mailgun_refuses_a_token_it_has_seen(client, mailgun, sent):
    delivery = sent()
    signature = mailgun_signature()
    first = mailgun_body(delivery.provider_message_id, signature)
    assert client.post(MAILGUN, data=first, content_type="application/json").status_code == 200
    # The same signed token again, even around a different (new) event: a replay.
    again = mailgun_body(delivery.provider_message_id, signature, event="failed", severity="permanent")
    before = snapshot()

    assert_refused(client.post(MAILGUN, data=again, content_type="application/json"), 403, before)


# --- Postmark ---------------------------------------------------------------------------------------


def test_postmark_accepts_its_basic_auth(client, postmark, sent):
    delivery = sent()
    response = client.post(POSTMARK, data=postmark_body(delivery.provider_message_id), headers=postmark)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json()["recorded"] == 1


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type": "application/json"},
        postmark_auth(password="wrong-password-1234"),
        postmark_auth(user="someone-else"),
        {"Authorization": "Bearer b6c1e0f2a9d84c3e97f1", "Content-Type": "application/json"},
    ],
    ids=["no_auth", "wrong_password", "wrong_user", "not_basic"],
)
def test_postmark_refuses_without_the_right_credentials(client, postmark, sent, headers):
    delivery = sent()
    before = snapshot()
    response = client.post(POSTMARK, data=postmark_body(delivery.provider_message_id, "Bounce"), headers=headers)
    assert_refused(response, 401, before)
    assert response.headers["WWW-Authenticate"].startswith("Basic")


# --- all of them ------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["sendgrid", "mailgun", "postmark", "sparkpost"])
def test_a_hook_without_its_key_is_not_there(client, provider):
    response = client.post(f"/hooks/providers/{provider}", data=b"[]", content_type="application/json")
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"


def test_the_body_is_bounded(client, app, postmark, monkeypatch):
    monkeypatch.setitem(app.config, "HOOK_MAX_BODY_BYTES", 1024)
    response = client.post(POSTMARK, data=b"[" + b" " * 2000 + b"]", headers=postmark)
    assert response.status_code == 413
    assert response.mimetype == "application/problem+json"


def test_the_hooks_need_no_csrf_token_and_no_session(app, client, postmark, sent, monkeypatch):
    monkeypatch.setitem(app.config, "WTF_CSRF_ENABLED", True)
    delivery = sent()
    response = client.post(POSTMARK, data=postmark_body(delivery.provider_message_id), headers=postmark)
    assert response.status_code == 200
    assert "Set-Cookie" not in response.headers


def test_requests_are_rate_limited_per_provider_and_client(client, app, postmark, monkeypatch):
    monkeypatch.setitem(app.config, "HOOK_RATE_LIMIT", "2 per minute")
    bad = postmark_auth(password="wrong-password-1234")
    assert [client.post(POSTMARK, data=b"{}", headers=bad).status_code for _ in range(3)] == [401, 401, 429]
    assert client.post(POSTMARK, data=b"{}", headers=bad).mimetype == "application/problem+json"


def test_a_mailgun_request_that_could_not_be_recorded_may_be_retried(client, mailgun, sent, monkeypatch):
    from app.hooks import service

    delivery = sent()
    body = mailgun_body(delivery.provider_message_id)
    record = service.record

    def fail_once(events):
        monkeypatch.setattr(service, "record", record)
        raise RuntimeError("database went away")

    monkeypatch.setattr(service, "record", fail_once)
    assert client.post(MAILGUN, data=body, content_type="application/json").status_code == 500

    # Mailgun retries the same signed request: its token was given back, so it is not taken for a replay.
    assert client.post(MAILGUN, data=body, content_type="application/json").status_code == 200
