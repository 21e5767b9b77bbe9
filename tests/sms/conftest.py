"""SMS status callbacks and replies as Twilio and Vonage send them: signed by the stand-ins' own signers.

The hooks read the TWILIO_* / VONAGE_* settings of a stand-in (tests/support/twilio_server.py, vonage_server.py);
the requests carry the X-Twilio-Signature twilio's RequestValidator computes, or the HS256 JWT Vonage's signed
webhooks carry (vonage_server.sign_webhook), over the public URL BASE_URL gives.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.providers.httpclients import close_all
from tests.factories import UserFactory
from tests.support.twilio_server import TwilioServer, new_sid, serving_app
from tests.support.vonage_server import VonageServer, sign_webhook

PHONE = "+819012345678"
TWILIO_STATUS = "/hooks/providers/twilio"
TWILIO_INBOUND = "/hooks/providers/twilio/inbound"
VONAGE_STATUS = "/hooks/providers/vonage"
VONAGE_INBOUND = "/hooks/providers/vonage/inbound"


@pytest.fixture
def twilio(app, monkeypatch):
    """A local Twilio whose account this installation uses (sends, and the hooks' auth token)."""
    with serving_app(app, monkeypatch) as server:
        yield server


@pytest.fixture
def vonage(app, monkeypatch):
    """A local Vonage whose account this installation uses (sends, and the signature secret)."""
    with VonageServer() as server:
        for name, value in {**server.settings(), "SMS_PROVIDER": "vonage"}.items():
            monkeypatch.setitem(app.config, name, value)
        yield server
    close_all()


class TwilioPoster:
    """Posts form webhooks to the test client signed as Twilio signs them (for BASE_URL + path unless told)."""

    def __init__(self, app, client, server: TwilioServer) -> None:
        self.app, self.client, self.server = app, client, server

    def post(self, path: str, params: dict, *, signed_url: str | None = None, signature: str | None = None,
             headers: dict | None = None, **kwargs):  # fmt: skip
        url = signed_url or self.app.config["BASE_URL"] + path
        sign = self.server.validator.compute_signature(url, params) if signature is None else signature
        sent = {"X-Twilio-Signature": sign} if sign else {}
        return self.client.post(path, data=params, headers={**sent, **(headers or {})}, **kwargs)

    def status(self, sid: str, status: str, error_code: int | None = None, to: str = PHONE, **kwargs):
        params = {"AccountSid": self.server.account_sid, "ApiVersion": "2010-04-01", "From": self.server.from_number,
                  "MessageSid": sid, "SmsSid": sid, "MessageStatus": status, "SmsStatus": status, "To": to}  # fmt: skip
        if error_code is not None:
            params["ErrorCode"] = str(error_code)
        return self.post(TWILIO_STATUS, params, **kwargs)

    def inbound(self, body: str, from_: str = PHONE, sid: str | None = None, **kwargs):
        sid = sid or new_sid("SM")
        params = {"ToCountry": "JP", "SmsMessageSid": sid, "NumMedia": "0", "SmsSid": sid, "SmsStatus": "received",
                  "Body": body, "To": self.server.from_number, "NumSegments": "1", "MessageSid": sid,
                  "AccountSid": self.server.account_sid, "From": from_, "ApiVersion": "2010-04-01",
                  "FromCity": ""}  # fmt: skip
        return self.post(TWILIO_INBOUND, params, **kwargs)


@pytest.fixture
def twilio_hook(app, client, twilio) -> TwilioPoster:
    return TwilioPoster(app, client, twilio)


class VonagePoster:
    """Posts JSON webhooks to the test client signed as Vonage signs them."""

    def __init__(self, client, server: VonageServer) -> None:
        self.client, self.server = client, server

    def post(self, path: str, payload: dict, *, token: str | None = None, body: bytes | None = None):
        raw = json.dumps(payload).encode() if body is None else body
        app = self.server.application
        token = sign_webhook(raw, app.signature_secret, app.api_key, app.application_id) if token is None else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.client.post(path, data=raw, headers=headers, content_type="application/json")

    def status(self, uuid: str, status: str, error_code: str | None = None, to: str = PHONE[1:], **kwargs):
        payload = {"message_uuid": uuid, "to": to, "from": self.server.application.number, "channel": "sms",
                   "status": status, "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z")}  # fmt: skip
        if error_code is not None:
            payload["error"] = {"type": f"https://developer.vonage.com/api-errors/messages#{error_code}",
                                "title": error_code, "detail": "Illegal Number", "instance": "x"}  # fmt: skip
        return self.post(VONAGE_STATUS, payload, **kwargs)

    def inbound(self, text: str, from_: str = PHONE[1:], **kwargs):
        payload = {"channel": "sms", "message_uuid": f"aaaaaaaa-bbbb-cccc-dddd-{new_sid('')[:12]}",
                   "message_type": "text", "to": self.server.application.number, "from": from_, "text": text,
                   "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z")}  # fmt: skip
        return self.post(VONAGE_INBOUND, payload, **kwargs)


@pytest.fixture
def vonage_hook(client, vonage) -> VonagePoster:
    return VonagePoster(client, vonage)


def member(phone: str | None = PHONE, consent: bool = True, **fields):
    """A member with a verified number and (by default) consent to SMS."""
    return UserFactory(phone=phone, phone_verified_at=datetime.now(UTC), sms_opt_in=consent, **fields)


@pytest.fixture
def sent_sms(make_delivery):
    """An SMS delivery a provider took, with the message id it answered."""

    def _sent(user, provider: str = "twilio", message_id: str | None = None):
        delivery = make_delivery(user=user, channel="sms", status="sent", attempts=1, provider=provider,
                                 sent_at=datetime.now(UTC))  # fmt: skip
        delivery.provider_message_id = message_id or new_sid("SM")
        db.session.flush()
        return delivery

    return _sent


def user_row(user) -> dict:
    return dict(db.session.execute(sa.text("SELECT * FROM users WHERE id = :u"), {"u": user.id}).mappings().one())


def consents(user) -> list[tuple[bool, str]]:
    rows = db.session.execute(
        sa.text("SELECT opted_in, source FROM sms_consents WHERE user_id = :u ORDER BY id"), {"u": user.id}
    )
    return [tuple(row) for row in rows]


def count(table: str, where: str = "true", **params) -> int:
    return db.session.execute(sa.text(f"SELECT count(*) FROM {table} WHERE {where}"), params).scalar_one()


def snapshot() -> tuple:
    """Everything a refused request must leave as it was."""
    return (
        count("provider_events"),
        count("sms_suppressions"),
        count("sms_consents"),
        count("email_suppressions"),
        tuple(db.session.execute(sa.text("SELECT id, sms_opt_in, phone_invalidated_at FROM users ORDER BY id")).all()),
        tuple(db.session.execute(sa.text("SELECT provider_status FROM notification_deliveries ORDER BY id")).scalars()),
    )


def reachable(user) -> bool:
    return db.session.execute(sa.text("SELECT sms_reachable(:u)"), {"u": user.id}).scalar_one()
