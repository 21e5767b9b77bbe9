"""The hook settings' start-up checks, and reading the providers' documented fields."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from app.config import Config, check
from app.hooks import formats
from app.providers.registry import registered_names

GOOD = {"SECRET_KEY": "k" * 48, "HATO_DEV": "0"}


def problems(**env) -> list[str]:
    return check(vars(Config({**GOOD, **env})), registered_names())


def _der(key) -> str:
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(der).decode()


def test_a_p256_key_in_base64_der_or_pem_is_accepted():
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert problems(SENDGRID_WEBHOOK_PUBLIC_KEY=_der(key)) == []
    assert problems(SENDGRID_WEBHOOK_PUBLIC_KEY=pem.decode()) == []


@pytest.mark.parametrize(
    "value",
    [
        "not base64!",
        base64.b64encode(b"random bytes").decode(),
        _der(ec.generate_private_key(ec.SECP384R1())),
        _der(rsa.generate_private_key(public_exponent=65537, key_size=2048)),
    ],
    ids=["garbage", "not_a_key", "p384", "rsa"],
)
def test_anything_else_stops_start_up(value):
    assert any(
        p.startswith("SENDGRID_WEBHOOK_PUBLIC_KEY is not an ECDSA P-256")
        for p in problems(SENDGRID_WEBHOOK_PUBLIC_KEY=value)
    )


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"POSTMARK_WEBHOOK_USER": "postmark"}, "POSTMARK_WEBHOOK_USER and POSTMARK_WEBHOOK_PASSWORD go together"),
        ({"POSTMARK_WEBHOOK_USER": "p", "POSTMARK_WEBHOOK_PASSWORD": "short"}, "POSTMARK_WEBHOOK_PASSWORD is shorter"),
        ({"MAILGUN_WEBHOOK_SIGNING_KEY": "key-1"}, "MAILGUN_WEBHOOK_SIGNING_KEY is shorter"),
        ({"DELIVERY_MAX_AGE": "10"}, "DELIVERY_MAX_AGE=10 is out of range"),
        ({"HOOK_RATE_LIMIT": "lots"}, "HOOK_RATE_LIMIT='lots' is not a rate"),
    ],
)
def test_hook_settings_that_cannot_work_are_named(env, expected):
    found = problems(**env)
    assert any(p.startswith(expected) for p in found), found


def test_the_max_age_defaults_to_a_day():
    assert Config(GOOD).DELIVERY_MAX_AGE == 86400


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("<delivery-1@hato.example>", "delivery-1@hato.example"),
        (" delivery-1@x ", "delivery-1@x"),
        (None, ""),
        (7, "7"),
    ],
)
def test_message_ids_are_compared_without_brackets(raw, expected):
    assert formats.normalise_message_id(raw) == expected


def test_postmarks_seven_digit_fractions_and_missing_times():
    (event,) = formats.parse_postmark(
        json.dumps({"RecordType": "Delivery", "MessageID": "m", "DeliveredAt": "2026-11-30T16:33:54.9070259Z"}).encode()
    ).events
    assert event.occurred_at == datetime(2026, 11, 30, 16, 33, 54, 907025, tzinfo=UTC)
    (later,) = formats.parse_postmark(b'{"RecordType": "Open", "MessageID": "m"}').events
    assert abs((later.occurred_at - datetime.now(UTC)).total_seconds()) < 5


@pytest.mark.parametrize(
    ("provider", "body"),
    [
        ("sendgrid", b'{"event": "delivered"}'),
        ("sendgrid", b"[1, 2]"),
        ("postmark", b"[]"),
        ("mailgun", b'{"signature": {}}'),
    ],
)
def test_shapes_the_provider_does_not_send_are_payload_errors(provider, body):
    with pytest.raises(formats.PayloadError):
        if provider == "sendgrid":
            formats.parse_sendgrid(body)
        elif provider == "postmark":
            formats.parse_postmark(body)
        else:
            formats.parse_mailgun(formats.mailgun_signed(body)[1])
