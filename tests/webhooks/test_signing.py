"""Standard Webhooks signatures, proven against the standardwebhooks package; sealed secrets."""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime

import pytest
from cryptography.exceptions import InvalidTag
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from app.webhooks import events, signing


def test_our_signature_is_the_package_s_and_verifies():
    secret = signing.new_secret()
    assert secret.startswith("whsec_") and len(base64.b64decode(secret[6:])) == 32
    body, _ = events.payload("notification.created", {"notification_id": 7, "title": "日本語"})
    now = int(time.time())
    headers = signing.headers(signing.secret_bytes(secret), "msg_abc", now, body.encode())
    package = Webhook(secret)
    assert headers["webhook-signature"] == package.sign("msg_abc", datetime.fromtimestamp(now, UTC), body)
    assert package.verify(body.encode(), headers)["data"]["notification_id"] == 7


def test_the_signature_matches_the_standard_webhooks_published_example():
    # The example of the Standard Webhooks specification (secret, id, timestamp, body → signature).
    key = signing.secret_bytes("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    headers = signing.headers(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}')
    assert headers["webhook-signature"] == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    assert headers["webhook-timestamp"] == "1614265330" and headers["webhook-id"] == "msg_p5jXN8AQM9LWM0D4loKWxJek"


def test_the_package_refuses_a_changed_body_or_another_secret():
    secret = signing.new_secret()
    headers = signing.headers(signing.secret_bytes(secret), "msg_abc", int(time.time()), b'{"a":1}')
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(b'{"a":2}', headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(signing.new_secret()).verify(b'{"a":1}', headers)


def test_a_sealed_secret_opens_only_with_its_key_and_row():
    secret = signing.new_secret()
    sealed = signing.seal(secret, 5, "app-secret")
    assert secret not in sealed and signing.unseal(sealed, 5, "app-secret") == secret
    with pytest.raises(InvalidTag):
        signing.unseal(sealed, 6, "app-secret")  # copied to another endpoint's row
    with pytest.raises(InvalidTag):
        signing.unseal(sealed, 5, "another-secret-key")


def test_the_payload_is_fixed_json_with_type_timestamp_and_data():
    body, at = events.payload("user.unsubscribed", {"user_id": 1})
    assert body.startswith('{"data":{"user_id":1},"timestamp":"') and body.endswith('","type":"user.unsubscribed"}')
    assert at.tzinfo is not None
