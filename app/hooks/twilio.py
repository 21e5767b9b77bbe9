"""Twilio's status callbacks and incoming messages: who sent them, and what they say, from Twilio's form fields.

Twilio signs each webhook with X-Twilio-Signature: HMAC-SHA1, keyed with TWILIO_AUTH_TOKEN, of the URL it posted
to followed by every form parameter (name and value, sorted by name), checked here with the twilio package's
RequestValidator. The URL is the public one (BASE_URL and the path, as Hato gave it to Twilio as StatusCallback
and as the operator typed it into the number's messaging webhook), never the Host a proxy passed on. A request
without a signature or with a wrong one is refused with 401 before any field is read.

Status callbacks (MessageSid, MessageStatus, ErrorCode, To) map onto Hato's provider events: accepted, scheduled,
queued and sending are "queued"; sent, delivered, read, undelivered, failed and canceled keep their names. The
event id is MessageSid:MessageStatus, so a resent callback is recorded once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import parse_qsl

from flask_babel import lazy_gettext
from twilio.request_validator import RequestValidator
from werkzeug.datastructures import MultiDict

from app.hooks.formats import DETAIL_TEXT_MAX, Parsed, PayloadError, ProviderEventIn
from app.hooks.sms_formats import TEXT_MAX, InboundSms, e164
from app.hooks.verify import Refused

SIGNATURE = "X-Twilio-Signature"
STATUS_EVENTS = {
    "accepted": "queued",
    "scheduled": "queued",
    "queued": "queued",
    "sending": "queued",
    "sent": "sent",
    "delivered": "delivered",
    "read": "read",
    "undelivered": "undelivered",
    "failed": "failed",
    "canceled": "canceled",
}
# Error codes of a failed / undelivered message that say what the send-time answer says (app/providers/twilio.py).
RECIPIENT_ERRORS = {"21211": "invalid_number", "21610": "unsubscribed"}


def public_url(base_url: str, path: str, query: bytes | str) -> str:
    """The URL Twilio signed: the installation's public origin (BASE_URL), the path and its query, if any."""
    query = query.decode("latin-1") if isinstance(query, bytes) else query
    return base_url.rstrip("/") + path + (f"?{query}" if query else "")


def form(body: bytes) -> MultiDict:
    """The form fields of a posted body (blank values kept: Twilio signs them too)."""
    try:
        return MultiDict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=200))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PayloadError("the body is not a form") from exc


def verify(auth_token: str, url: str, fields: MultiDict, signature: str | None) -> None:
    """Check X-Twilio-Signature over url and fields; raise Refused (401) when it is missing or wrong."""
    if not signature:
        raise Refused(401, lazy_gettext("The request carries no Twilio signature."))
    # validate() also tries the URL with and without its port, as Twilio's own libraries do.
    if not RequestValidator(auth_token).validate(url, fields, signature.strip()):
        raise Refused(401, lazy_gettext("The Twilio signature does not match."))


def _field(fields: MultiDict, name: str) -> str:
    return str(fields.get(name) or "").strip()[:DETAIL_TEXT_MAX]


def parse_status(fields: MultiDict) -> Parsed:
    """The event of a verified status callback (one per post); a status Hato does not track is ignored."""
    sid, status = _field(fields, "MessageSid") or _field(fields, "SmsSid"), _field(fields, "MessageStatus").lower()
    if not sid or not status:
        raise PayloadError("a status callback names its MessageSid and MessageStatus")
    event = STATUS_EVENTS.get(status)
    if event is None:
        return Parsed(ignored=1)
    code, phone = _field(fields, "ErrorCode"), e164(_field(fields, "To"))
    detail = {"status": status, **({"error_code": code, "reason": f"ErrorCode {code}"} if code else {})}
    # A status callback carries no time of its own: it happened about now.
    return Parsed(
        events=[ProviderEventIn("twilio", f"{sid}:{status}", event, (sid,), phone, datetime.now(UTC), detail)]
    )


def parse_inbound(fields: MultiDict) -> InboundSms:
    """The message of a verified incoming-message webhook."""
    sid = _field(fields, "MessageSid") or _field(fields, "SmsSid")
    if not sid:
        raise PayloadError("an incoming message names its MessageSid")
    return InboundSms("twilio", sid, e164(_field(fields, "From")), _field(fields, "To"),
                      str(fields.get("Body") or "")[:TEXT_MAX])  # fmt: skip
