"""verify_webhook reads what the app's webhook signing makes; sign_user_token makes what the app's verify reads."""

from __future__ import annotations

import json
import time

import jwt
import pytest
from hato_client import WebhookVerificationError, sign_user_token, verify_webhook

from app import user_tokens
from app.webhooks import signing


def test_a_webhook_signed_by_the_app_verifies_and_a_changed_or_stale_one_does_not():
    secret = signing.new_secret()
    body = json.dumps({"type": "notification.read", "data": {"id": 7}}).encode()
    headers = signing.headers(signing.secret_bytes(secret), "msg_1", int(time.time()), body)
    headers = {name.title(): value for name, value in headers.items()}  # as a web framework spells them

    assert verify_webhook(headers, body, secret) == {"type": "notification.read", "data": {"id": 7}}
    with pytest.raises(WebhookVerificationError):
        verify_webhook(headers, body.replace(b"7", b"8"), secret)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(headers, body, signing.new_secret())
    stale = signing.headers(signing.secret_bytes(secret), "msg_1", int(time.time()) - 3600, body)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(stale, body, secret)


def test_a_token_signed_by_the_sdk_is_one_the_app_verifies(app):
    prefix = "hato_abcd1234"
    secret = {"kid": prefix, "secret": user_tokens.signing_secret_text(prefix), "audience": "http://hato.test/"}
    token = sign_user_token("ann", 600, secret, tenant="acme")
    claims = jwt.decode(token, user_tokens.signing_secret(prefix), algorithms=["HS256"], audience="http://hato.test")
    assert (claims["sub"], claims["tenant"], claims["exp"] - claims["iat"]) == ("ann", "acme", 600)
    assert jwt.get_unverified_header(token) == {"alg": "HS256", "typ": "JWT", "kid": prefix}
    with pytest.raises(ValueError, match="kid and audience"):
        sign_user_token("ann", 600, secret["secret"])
