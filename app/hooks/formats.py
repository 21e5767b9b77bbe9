"""What SendGrid, Mailgun and Postmark post about sent e-mail, read from their documented field names.

Pure: bytes or an already verified JSON document in, ProviderEventIn out (app/hooks/verify.py checks the
request first). Each body is read through pydantic models of the fields Hato uses: a body of another shape
is a PayloadError that names the field (a 400 for the provider); providers add and vary fields freely, so a
field of an odd type reads as empty rather than refusing the whole request.

Each provider's events map onto Hato's six: delivered, bounced (hard: the address is
suppressed), soft_bounced (recorded), complained, opened, clicked; anything else a provider reports
(processed, deferred, accepted, unsubscribed …) is counted as ignored. Each event carries the message
ids it may be known by, without angle brackets, and the id the provider gives it (or, where the provider
gives none, a hash of the event itself), so a resent event is recorded once.

- SendGrid Event Webhook: a JSON array of events; `event` delivered | bounce (`type` bounce = hard,
  blocked = soft) | dropped | spamreport | open | click; `smtp-id` (the Message-ID header) and
  `sg_message_id` (SendGrid's own id: its X-Message-Id, then `.filter…`); `sg_event_id`; `timestamp`.
- Mailgun webhooks: one JSON object, `event-data` with `event` delivered | failed (`severity` permanent =
  hard, temporary = soft) | complained | opened | clicked, `message.headers.message-id`, `recipient`, `id`,
  `timestamp`.
- Postmark webhooks: one JSON object per event, `RecordType` Delivery | Bounce (`Type`/`TypeCode`:
  HardBounce 1 … hard, the others soft) | SpamComplaint | Open | Click, `MessageID`, `Recipient`/`Email`,
  `ID` on bounces and complaints.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, StringConstraints, TypeAdapter, ValidationError

DETAIL_TEXT_MAX = 500
MAX_EVENTS = 10_000  # per request (HOOK_MAX_BODY_BYTES bounds it first: an event is a few hundred bytes)


class PayloadError(ValueError):
    """The (verified) body is not what the provider documents; validation is pydantic's account of why, if any."""

    def __init__(self, message: str, validation: ValidationError | None = None) -> None:
        super().__init__(message)
        self.validation = validation


@dataclass(frozen=True)
class ProviderEventIn:
    """One event a provider reported, in Hato's words."""

    provider: str
    event_id: str
    event: str  # delivered | bounced | soft_bounced | complained | opened | clicked
    message_ids: tuple[str, ...]
    recipient: str
    occurred_at: datetime
    detail: dict = field(default_factory=dict)

    @property
    def message_id(self) -> str:
        """The id shown with the event (the first candidate)."""
        return self.message_ids[0] if self.message_ids else ""


@dataclass
class Parsed:
    """The events of one request, and how many it held that Hato does not track."""

    events: list[ProviderEventIn] = field(default_factory=list)
    ignored: int = 0


def normalise_message_id(value: object) -> str:
    """A message id as the ledger compares it: trimmed, without its angle brackets."""
    return str(value or "").strip().strip("<>").strip() if isinstance(value, str | int) else ""


def _text(value: object) -> str:
    return str(value)[:DETAIL_TEXT_MAX] if isinstance(value, str | int | float) and not isinstance(value, bool) else ""


def _from_epoch(value: object) -> datetime:
    try:
        seconds = float(value)  # type: ignore[arg-type]
        if seconds != seconds or not 0 < seconds < 32503680000:  # NaN, or outside years 1970-3000
            raise ValueError(value)
        return datetime.fromtimestamp(seconds, UTC)
    except (TypeError, ValueError, OverflowError):
        return datetime.now(UTC)


def from_iso(value: object) -> datetime:
    """An ISO 8601 time as the providers write it (Z, up to seven fractional digits); unreadable: now."""
    if isinstance(value, str) and value:
        text = value.strip().replace("Z", "+00:00")
        # Postmark writes seven fractional digits (.9070259); Python reads at most six.
        if "." in text:
            head, _, tail = text.partition(".")
            digits = "".join(c for c in tail if c.isdigit())
            zone = tail[len(digits) :]
            text = f"{head}.{digits[:6]}{zone}"
        try:
            parsed = datetime.fromisoformat(text)
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        except ValueError:
            pass
    return datetime.now(UTC)


def _object_or_empty(value: object) -> object:
    # A sub-object of another shape reads as empty (as if left out): the event's other fields still count.
    return value if isinstance(value, dict) else {}


# A provider's field as Hato keeps it: any scalar as text (cut to DETAIL_TEXT_MAX), anything else empty.
Text = Annotated[str, BeforeValidator(_text)]
MessageId = Annotated[str, BeforeValidator(normalise_message_id)]
EpochSeconds = Annotated[datetime, BeforeValidator(_from_epoch)]  # unreadable: now


def _now() -> datetime:
    return datetime.now(UTC)


def _detail(**values: str) -> dict:
    """The raw subset kept with an event: short text fields only, empty ones left out."""
    return {name: value for name, value in values.items() if value}


def _event_hash(provider: str, item: object) -> str:
    canonical = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"sha256:{hashlib.sha256(f'{provider}:{canonical}'.encode()).hexdigest()}"


def _json(body: bytes) -> object:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PayloadError("the body is not JSON") from exc


def _validated(validate, document: object, provider: str):
    try:
        return validate(document)
    except ValidationError as exc:
        raise PayloadError(f"not what {provider} sends", exc) from None


# --- SendGrid ---------------------------------------------------------------------------------------

SENDGRID_HARD_DROPS = ("bounced address", "invalid")


class SendGridEvent(BaseModel):
    """One event of SendGrid's Event Webhook: the fields Hato reads."""

    event: Text = ""
    type: Text = ""
    reason: Text = ""
    status: Text = ""
    response: Text = ""
    url: Text = ""
    email: Text = ""
    smtp_id: MessageId = Field("", alias="smtp-id")
    sg_message_id: MessageId = ""
    sg_event_id: Text = ""
    timestamp: EpochSeconds = Field(default_factory=_now)


SENDGRID_POST = TypeAdapter(Annotated[list[SendGridEvent], Field(max_length=MAX_EVENTS)])


def _sendgrid_kind(item: SendGridEvent) -> str | None:
    if item.event == "delivered":
        return "delivered"
    if item.event == "bounce":
        return "soft_bounced" if item.type == "blocked" else "bounced"
    if item.event == "dropped":  # SendGrid refused to send: hard only for an address known to be bad
        return "bounced" if item.reason.strip().lower().startswith(SENDGRID_HARD_DROPS) else "soft_bounced"
    return {"spamreport": "complained", "open": "opened", "click": "clicked"}.get(item.event)


def parse_sendgrid(body: bytes) -> Parsed:
    """The events of a SendGrid Event Webhook post (a JSON array of objects)."""
    raw = _json(body)
    parsed = Parsed()
    for document, item in zip(raw, _validated(SENDGRID_POST.validate_python, raw, "SendGrid"), strict=True):
        kind = _sendgrid_kind(item)
        if kind is None:
            parsed.ignored += 1
            continue
        candidates = [item.smtp_id, item.sg_message_id, item.sg_message_id.split(".filter")[0]]
        parsed.events.append(
            ProviderEventIn(
                provider="sendgrid",
                event_id=item.sg_event_id or _event_hash("sendgrid", document),
                event=kind,
                message_ids=tuple(dict.fromkeys(c for c in candidates if c)),
                recipient=item.email,
                occurred_at=item.timestamp,
                detail=_detail(
                    reason=item.reason, status=item.status, type=item.type, response=item.response, url=item.url
                ),
            )
        )
    return parsed


# --- Mailgun ----------------------------------------------------------------------------------------

# The signature's parts: text or a number, never empty (a number is read as its digits).
SignaturePart = Annotated[
    str, BeforeValidator(lambda v: str(v) if isinstance(v, int) else v), StringConstraints(min_length=1)
]


class MailgunSignature(BaseModel):
    """Mailgun's `signature` object (app/hooks/verify.py checks it)."""

    timestamp: SignaturePart
    token: SignaturePart
    signature: SignaturePart


class MailgunSigned(BaseModel):
    """What Mailgun posts, as far as it is read before its signature holds."""

    signature: MailgunSignature


class MailgunDeliveryStatus(BaseModel):
    code: Text = ""
    description: Text = ""
    message: Text = ""


class MailgunHeaders(BaseModel):
    message_id: MessageId = Field("", alias="message-id")


class MailgunMessage(BaseModel):
    headers: Annotated[MailgunHeaders, BeforeValidator(_object_or_empty)] = Field(default_factory=MailgunHeaders)


class MailgunEvent(BaseModel):
    """Mailgun's `event-data`: the fields Hato reads."""

    event: Text = ""
    severity: Text = ""
    reason: Text = ""
    url: Text = ""
    recipient: Text = ""
    id: Text = ""
    timestamp: EpochSeconds = Field(default_factory=_now)
    message: Annotated[MailgunMessage, BeforeValidator(_object_or_empty)] = Field(default_factory=MailgunMessage)
    delivery_status: Annotated[MailgunDeliveryStatus, BeforeValidator(_object_or_empty)] = Field(
        default_factory=MailgunDeliveryStatus, alias="delivery-status"
    )


class MailgunPost(BaseModel):
    """What Mailgun posts, read once its signature holds."""

    event_data: MailgunEvent = Field(alias="event-data")


def mailgun_signed(body: bytes) -> tuple[MailgunSignature, dict]:
    """The signature of a Mailgun post, and the post itself, whose event is read only once that holds."""
    document = _json(body)
    return _validated(MailgunSigned.model_validate, document, "Mailgun").signature, document


def _mailgun_kind(data: MailgunEvent) -> str | None:
    if data.event == "failed":
        return "bounced" if data.severity == "permanent" else "soft_bounced"
    return {"delivered": "delivered", "complained": "complained", "opened": "opened", "clicked": "clicked"}.get(
        data.event
    )


def parse_mailgun(document: dict) -> Parsed:
    """The event of a verified Mailgun webhook post."""
    data = _validated(MailgunPost.model_validate, document, "Mailgun").event_data
    kind = _mailgun_kind(data)
    if kind is None:
        return Parsed(ignored=1)
    message_id = data.message.headers.message_id
    status = data.delivery_status
    event = ProviderEventIn(
        provider="mailgun",
        event_id=data.id or _event_hash("mailgun", document["event-data"]),
        event=kind,
        message_ids=(message_id,) if message_id else (),
        recipient=data.recipient,
        occurred_at=data.timestamp,
        detail=_detail(
            severity=data.severity,
            reason=data.reason,
            code=status.code,
            description=status.description or status.message,
            url=data.url,
        ),
    )
    return Parsed(events=[event])


# --- Postmark ---------------------------------------------------------------------------------------

POSTMARK_HARD_TYPES = ("HardBounce", "BadEmailAddress", "ManuallyDeactivated")
POSTMARK_HARD_CODES = ("1", "100000", "100001")


class PostmarkEvent(BaseModel):
    """One Postmark webhook post: the fields Hato reads."""

    record_type: Text = Field("", alias="RecordType")
    type: Text = Field("", alias="Type")
    type_code: Text = Field("", alias="TypeCode")
    message_id: MessageId = Field("", alias="MessageID")
    recipient: Text = Field("", alias="Recipient")
    email: Text = Field("", alias="Email")
    id: Text = Field("", alias="ID")
    delivered_at: Any = Field(None, alias="DeliveredAt")
    bounced_at: Any = Field(None, alias="BouncedAt")
    received_at: Any = Field(None, alias="ReceivedAt")
    description: Text = Field("", alias="Description")
    details: Text = Field("", alias="Details")
    original_link: Text = Field("", alias="OriginalLink")


def _postmark_kind(item: PostmarkEvent) -> str | None:
    if item.record_type == "Bounce":
        if item.type == "SpamComplaint":
            return "complained"
        hard = item.type in POSTMARK_HARD_TYPES or item.type_code in POSTMARK_HARD_CODES
        return "bounced" if hard else "soft_bounced"
    return {"Delivery": "delivered", "SpamComplaint": "complained", "Open": "opened", "Click": "clicked"}.get(
        item.record_type
    )


def parse_postmark(body: bytes) -> Parsed:
    """The event of a Postmark webhook post (one JSON object)."""
    document = _json(body)
    item = _validated(PostmarkEvent.model_validate, document, "Postmark")
    kind = _postmark_kind(item)
    if kind is None:
        return Parsed(ignored=1)
    event = ProviderEventIn(
        provider="postmark",
        event_id=f"{item.record_type}:{item.id}" if item.id else _event_hash("postmark", document),
        event=kind,
        message_ids=(item.message_id,) if item.message_id else (),
        recipient=item.recipient or item.email,
        occurred_at=from_iso(item.delivered_at or item.bounced_at or item.received_at),
        detail=_detail(
            type=item.type,
            type_code=item.type_code,
            description=item.description,
            details=item.details,
            url=item.original_link,
        ),
    )
    return Parsed(events=[event])
