"""Provider webhooks as the providers send them: keys the tests generate, bodies signed with them.

The payloads follow the shapes of each provider's documentation examples (SendGrid's Event Webhook
array, Mailgun's {signature, event-data}, Postmark's one record per post); the ledger row they talk about
carries the Message-ID our SMTP provider records at send time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time

import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from app.extensions import db
from tests.factories import UserFactory

MAILGUN_KEY = "key-" + "3ax6xnjp29jd6fds4gc373sgvjxteol0"
POSTMARK_USER = "postmark-hooks"
POSTMARK_PASSWORD = "b6c1e0f2a9d84c3e97f1"


class SendGrid:
    """Signs bodies as SendGrid's Signed Event Webhook does (ECDSA P-256, SHA-256, over timestamp + body)."""

    def __init__(self) -> None:
        self.private_key = ec.generate_private_key(ec.SECP256R1())
        der = self.private_key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.public_key = base64.b64encode(der).decode()  # what SendGrid's settings page shows

    def headers(self, body: bytes, timestamp: int | None = None, key=None) -> dict:
        timestamp = int(time.time()) if timestamp is None else timestamp
        signer = key or self.private_key
        signature = signer.sign(str(timestamp).encode() + body, ec.ECDSA(hashes.SHA256()))
        return {
            "Content-Type": "application/json",
            "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
            "X-Twilio-Email-Event-Webhook-Timestamp": str(timestamp),
        }


def mailgun_signature(timestamp: int | None = None, token: str | None = None, key: str = MAILGUN_KEY) -> dict:
    """Mailgun's signature object: HMAC-SHA256(signing key, timestamp + token), hex."""
    timestamp = int(time.time()) if timestamp is None else timestamp
    token = token or secrets.token_hex(25)  # 50 characters, as Mailgun's
    digest = hmac.new(key.encode(), f"{timestamp}{token}".encode(), hashlib.sha256).hexdigest()
    return {"timestamp": str(timestamp), "token": token, "signature": digest}


def postmark_auth(user: str = POSTMARK_USER, password: str = POSTMARK_PASSWORD) -> dict:
    raw = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {raw}", "Content-Type": "application/json"}


@pytest.fixture
def sendgrid(app, monkeypatch) -> SendGrid:
    """SendGrid's hook on, with a key pair made for this test."""
    provider = SendGrid()
    monkeypatch.setitem(app.config, "SENDGRID_WEBHOOK_PUBLIC_KEY", provider.public_key)
    return provider


@pytest.fixture
def mailgun(app, monkeypatch) -> str:
    """Mailgun's hook on; the signing key."""
    monkeypatch.setitem(app.config, "MAILGUN_WEBHOOK_SIGNING_KEY", MAILGUN_KEY)
    return MAILGUN_KEY


@pytest.fixture
def postmark(app, monkeypatch) -> dict:
    """Postmark's hook on; the basic-auth headers of its webhook URL."""
    monkeypatch.setitem(app.config, "POSTMARK_WEBHOOK_USER", POSTMARK_USER)
    monkeypatch.setitem(app.config, "POSTMARK_WEBHOOK_PASSWORD", POSTMARK_PASSWORD)
    return postmark_auth()


@pytest.fixture
def alice():
    """The member the providers' example events are about (alice@example.com)."""
    return UserFactory(email="alice@example.com", external_id="alice")


@pytest.fixture
def sent(make_delivery, alice):
    """An e-mail delivery to alice our SMTP provider sent, with the Message-ID it recorded."""

    def _sent(message_id: str | None = None, **fields):
        fields.setdefault("user", alice)
        delivery = make_delivery(status="sent", attempts=1, provider="smtp", **fields)
        delivery.provider_message_id = message_id or f"<delivery-{delivery.id}@hato.example>"
        db.session.flush()
        return delivery

    return _sent


def bare(message_id: str) -> str:
    return message_id.strip("<>")


def sendgrid_events(message_id: str, *events: dict) -> bytes:
    """A SendGrid Event Webhook body (documentation shape) about message_id; each event dict overrides."""
    base = {
        "email": "alice@example.com",
        "timestamp": int(time.time()) - 5,
        "smtp-id": message_id,
        "category": ["comment"],
        "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0",
    }
    items = [{**base, "sg_event_id": secrets.token_urlsafe(16), **event} for event in events]
    return json.dumps(items).encode()


def mailgun_body(message_id: str, signature: dict | None = None, **event_data) -> bytes:
    """A Mailgun webhook body (documentation shape) about message_id."""
    data = {
        "id": secrets.token_urlsafe(16),
        "timestamp": time.time() - 5,
        "log-level": "info",
        "event": "delivered",
        "recipient": "alice@example.com",
        "recipient-domain": "example.com",
        "message": {"headers": {"message-id": bare(message_id), "to": "alice@example.com", "subject": "Hello"}},
        "delivery-status": {"code": 250, "message": "OK", "description": ""},
        "flags": {"is-routed": False, "is-authenticated": True},
    }
    data.update(event_data)
    return json.dumps({"signature": signature or mailgun_signature(), "event-data": data}).encode()


def postmark_body(message_id: str, record_type: str = "Delivery", **fields) -> bytes:
    """A Postmark webhook body (documentation shape) about message_id."""
    shapes = {
        "Delivery": {
            "MessageStream": "outbound",
            "Recipient": "alice@example.com",
            "Tag": "comment",
            "DeliveredAt": "2026-11-30T16:33:54.9070259Z",
            "Details": "Test delivery webhook details",
            "ServerID": 23,
            "Metadata": {},
        },
        "Bounce": {
            "ID": 4323372036854775807,
            "Type": "HardBounce",
            "TypeCode": 1,
            "Name": "Hard bounce",
            "Tag": "comment",
            "ServerID": 23,
            "MessageStream": "outbound",
            "Description": "The server was unable to deliver your message (ex: unknown user, mailbox not found).",
            "Details": "smtp;550 5.1.1 The email account that you tried to reach does not exist.",
            "Email": "alice@example.com",
            "From": "hato@example.com",
            "BouncedAt": "2026-11-30T16:33:54.9070259Z",
            "DumpAvailable": True,
            "Inactive": True,
            "CanActivate": True,
            "Subject": "Hello",
        },
        "SpamComplaint": {
            "ID": 42,
            "Type": "SpamComplaint",
            "TypeCode": 512,
            "Name": "Spam complaint",
            "Email": "alice@example.com",
            "BouncedAt": "2026-11-30T16:33:54.9070259Z",
            "MessageStream": "outbound",
            "Subject": "Hello",
        },
        "Open": {
            "MessageStream": "outbound",
            "FirstOpen": True,
            "Client": {"Name": "Chrome 35.0.1916.153", "Company": "Google", "Family": "Chrome"},
            "OS": {"Name": "OS X 10.7 Lion", "Company": "Apple Computer, Inc.", "Family": "OS X 10"},
            "Platform": "WebMail",
            "UserAgent": "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_7_5)",
            "ReadSeconds": 5,
            "Geo": {},
            "Recipient": "alice@example.com",
            "ReceivedAt": "2026-11-30T16:34:54.9070259Z",
            "Tag": "comment",
            "Metadata": {},
        },
        "Click": {
            "MessageStream": "outbound",
            "ClickLocation": "HTML",
            "Platform": "Desktop",
            "OriginalLink": "https://example.com/inbox",
            "Recipient": "alice@example.com",
            "ReceivedAt": "2026-11-30T16:35:54.9070259Z",
            "Tag": "comment",
            "Metadata": {},
        },
    }
    document = {"RecordType": record_type, "MessageID": bare(message_id), **shapes[record_type], **fields}
    return json.dumps(document).encode()


def events_of(delivery) -> list[tuple[str, str]]:
    rows = db.session.execute(
        sa.text("SELECT provider, event FROM provider_events WHERE delivery_id = :id ORDER BY occurred_at, id"),
        {"id": delivery.id},
    )
    return [tuple(row) for row in rows]


def count(table: str, where: str = "true", **params) -> int:
    return db.session.execute(sa.text(f"SELECT count(*) FROM {table} WHERE {where}"), params).scalar_one()


def snapshot() -> tuple:
    """Everything a refused request must leave as it was."""
    return (
        count("provider_events"),
        count("email_suppressions"),
        count("notification_preferences"),
        tuple(db.session.execute(sa.text("SELECT provider_status FROM notification_deliveries ORDER BY id")).scalars()),
    )
