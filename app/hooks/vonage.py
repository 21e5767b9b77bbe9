"""Vonage's Messages API webhooks (status and inbound SMS): who sent them, and what they say.

Vonage signs each webhook: `Authorization: Bearer <JWT>`, HS256 with the account's signature secret
(VONAGE_SIGNATURE_SECRET), whose `payload_hash` claim is the SHA-256 (hex) of the body and whose `iat` says when
it was signed. All three are checked (PyJWT) before the body is read: a token missing, badly signed, for another
body or further than HOOK_MAX_AGE_SECONDS from now is refused with 401.

Status webhooks (message_uuid, status, error {type, title, detail}, timestamp, to, channel) map onto Hato's
provider events: submitted is "sent", rejected "failed", undeliverable "undelivered"; delivered and read keep their
names. The event id is message_uuid:status, so a resent webhook is recorded once. Other channels are ignored.
"""

from __future__ import annotations

import hashlib
import hmac
import json

import jwt
from flask_babel import lazy_gettext

from app.hooks.formats import DETAIL_TEXT_MAX, Parsed, PayloadError, ProviderEventIn, from_iso
from app.hooks.sms_formats import TEXT_MAX, InboundSms, e164
from app.hooks.verify import Refused

STATUS_EVENTS = {
    "submitted": "sent",
    "delivered": "delivered",
    "read": "read",
    "rejected": "failed",
    "undeliverable": "undelivered",
}
# Delivery errors (developer.vonage.com/api-errors/messages) that say what Twilio's 21211 / 21610 say.
RECIPIENT_ERRORS = {"1170": "invalid_number", "1190": "invalid_number", "1240": "unsubscribed"}


def verify(secret: str, authorization: str | None, body: bytes, now: float, max_age: float) -> None:
    """Check the signed webhook's JWT, its payload_hash against body and its age; raise Refused (401)."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Refused(401, lazy_gettext("The request carries no Vonage signature."))
    try:
        claims = jwt.decode(token.strip(), secret, algorithms=["HS256"],
                            options={"require": ["iat", "payload_hash"], "verify_aud": False})  # fmt: skip
    except jwt.PyJWTError:
        raise Refused(401, lazy_gettext("The Vonage signature does not match.")) from None
    expected = hashlib.sha256(body).hexdigest()
    if not hmac.compare_digest(expected, str(claims["payload_hash"]).lower()):
        raise Refused(401, lazy_gettext("The Vonage signature is for another body."))
    try:
        signed_at = float(claims["iat"])
    except (TypeError, ValueError):
        raise Refused(401, lazy_gettext("The Vonage signature does not match.")) from None
    if abs(now - signed_at) > max_age:
        raise Refused(401, lazy_gettext("The webhook timestamp is too old (or in the future): a replay is refused."))


def _document(body: bytes) -> dict:
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PayloadError("the body is not JSON") from exc
    if not isinstance(document, dict):
        raise PayloadError("the body is not a JSON object")
    return document


def _text(value: object, limit: int = DETAIL_TEXT_MAX) -> str:
    ok = isinstance(value, str | int) and not isinstance(value, bool)
    return str(value).strip()[:limit] if ok else ""


def _error_code(error: dict) -> str:
    """The code of a status's error: its title (a number) or the fragment of its type URL."""
    title = _text(error.get("title"))
    if title.isdigit():
        return title
    fragment = _text(error.get("type")).rpartition("#")[2]
    return fragment if fragment.isdigit() else ""


def parse_status(body: bytes) -> Parsed:
    """The event of a verified status webhook; another channel's, or a status Hato does not track, is ignored."""
    document = _document(body)
    uuid, status = _text(document.get("message_uuid")), _text(document.get("status")).lower()
    if not uuid or not status:
        raise PayloadError("a status webhook names its message_uuid and status")
    event = STATUS_EVENTS.get(status)
    if event is None or _text(document.get("channel")) not in ("sms", ""):
        return Parsed(ignored=1)
    error = document.get("error") if isinstance(document.get("error"), dict) else {}
    code = _error_code(error)
    reason = _text(error.get("detail")) or _text(error.get("title"))
    detail = {"status": status, **({"error_code": code} if code else {}), **({"reason": reason} if reason else {})}
    phone = e164(_text(document.get("to")))
    occurred = from_iso(document.get("timestamp"))
    return Parsed(events=[ProviderEventIn("vonage", f"{uuid}:{status}", event, (uuid,), phone, occurred, detail)])


def parse_inbound(body: bytes) -> InboundSms | None:
    """The message of a verified inbound webhook; None for another channel's."""
    document = _document(body)
    uuid = _text(document.get("message_uuid"))
    if not uuid:
        raise PayloadError("an inbound message names its message_uuid")
    if _text(document.get("channel")) not in ("sms", ""):
        return None
    return InboundSms("vonage", uuid, e164(_text(document.get("from"))), _text(document.get("to")),
                      _text(document.get("text"), TEXT_MAX))  # fmt: skip
