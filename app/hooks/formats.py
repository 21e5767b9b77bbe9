"""What SendGrid, Mailgun and Postmark post about sent e-mail, read from their documented field names.

Pure: bytes or an already verified JSON document in, ProviderEventIn out (app/hooks/verify.py checks the
request first). Each provider's events map onto Hato's six: delivered, bounced (hard: the address is
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

DETAIL_TEXT_MAX = 500
MAX_EVENTS = 10_000  # per request (HOOK_MAX_BODY_BYTES bounds it first: an event is a few hundred bytes)


class PayloadError(ValueError):
    """The (verified) body is not what the provider documents."""


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


def _detail(**values: object) -> dict:
    """The raw subset kept with an event: short text fields only, empty ones left out."""
    return {name: text for name, value in values.items() if (text := _text(value))}


def _event_hash(provider: str, item: object) -> str:
    canonical = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"sha256:{hashlib.sha256(f'{provider}:{canonical}'.encode()).hexdigest()}"


def _from_epoch(value: object) -> datetime:
    try:
        seconds = float(value)  # type: ignore[arg-type]
        if seconds != seconds or not 0 < seconds < 32503680000:  # NaN, or outside years 1970-3000
            raise ValueError(value)
        return datetime.fromtimestamp(seconds, UTC)
    except (TypeError, ValueError, OverflowError):
        return datetime.now(UTC)


def _from_iso(value: object) -> datetime:
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


def _json(body: bytes) -> object:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PayloadError("the body is not JSON") from exc


# --- SendGrid ---------------------------------------------------------------------------------------

SENDGRID_HARD_DROPS = ("bounced address", "invalid")


def _sendgrid_kind(item: dict) -> str | None:
    event = item.get("event")
    if event == "delivered":
        return "delivered"
    if event == "bounce":
        return "soft_bounced" if item.get("type") == "blocked" else "bounced"
    if event == "dropped":  # SendGrid refused to send: hard only for an address known to be bad
        reason = str(item.get("reason") or "").strip().lower()
        return "bounced" if reason.startswith(SENDGRID_HARD_DROPS) else "soft_bounced"
    return {"spamreport": "complained", "open": "opened", "click": "clicked"}.get(str(event))


def parse_sendgrid(body: bytes) -> Parsed:
    """The events of a SendGrid Event Webhook post (a JSON array)."""
    items = _json(body)
    if not isinstance(items, list):
        raise PayloadError("SendGrid posts a JSON array of events")
    if len(items) > MAX_EVENTS:
        raise PayloadError(f"more than {MAX_EVENTS} events in one request")
    parsed = Parsed()
    for item in items:
        if not isinstance(item, dict):
            raise PayloadError("each SendGrid event is a JSON object")
        kind = _sendgrid_kind(item)
        if kind is None:
            parsed.ignored += 1
            continue
        sg_message_id = normalise_message_id(item.get("sg_message_id"))
        candidates = [normalise_message_id(item.get("smtp-id")), sg_message_id, sg_message_id.split(".filter")[0]]
        parsed.events.append(
            ProviderEventIn(
                provider="sendgrid",
                event_id=_text(item.get("sg_event_id")) or _event_hash("sendgrid", item),
                event=kind,
                message_ids=tuple(dict.fromkeys(c for c in candidates if c)),
                recipient=_text(item.get("email")),
                occurred_at=_from_epoch(item.get("timestamp")),
                detail=_detail(
                    reason=item.get("reason"),
                    status=item.get("status"),
                    type=item.get("type"),
                    response=item.get("response"),
                    url=item.get("url"),
                ),
            )
        )
    return parsed


# --- Mailgun ----------------------------------------------------------------------------------------


def mailgun_document(body: bytes) -> dict:
    """The JSON object Mailgun posts: {"signature": {...}, "event-data": {...}} (read only to verify it)."""
    document = _json(body)
    if not isinstance(document, dict):
        raise PayloadError("Mailgun posts a JSON object")
    return document


def _mailgun_kind(data: dict) -> str | None:
    event = data.get("event")
    if event == "failed":
        return "bounced" if data.get("severity") == "permanent" else "soft_bounced"
    return {"delivered": "delivered", "complained": "complained", "opened": "opened", "clicked": "clicked"}.get(
        str(event)
    )


def parse_mailgun(document: dict) -> Parsed:
    """The event of a verified Mailgun webhook document."""
    data = document.get("event-data")
    if not isinstance(data, dict):
        raise PayloadError("Mailgun's event-data is missing")
    kind = _mailgun_kind(data)
    if kind is None:
        return Parsed(ignored=1)
    message = data.get("message") if isinstance(data.get("message"), dict) else {}
    headers = message.get("headers") if isinstance(message.get("headers"), dict) else {}
    status = data.get("delivery-status") if isinstance(data.get("delivery-status"), dict) else {}
    message_id = normalise_message_id(headers.get("message-id"))
    event = ProviderEventIn(
        provider="mailgun",
        event_id=_text(data.get("id")) or _event_hash("mailgun", data),
        event=kind,
        message_ids=(message_id,) if message_id else (),
        recipient=_text(data.get("recipient")),
        occurred_at=_from_epoch(data.get("timestamp")),
        detail=_detail(
            severity=data.get("severity"),
            reason=data.get("reason"),
            code=status.get("code"),
            description=status.get("description") or status.get("message"),
            url=data.get("url"),
        ),
    )
    return Parsed(events=[event])


# --- Postmark ---------------------------------------------------------------------------------------

POSTMARK_HARD_TYPES = ("HardBounce", "BadEmailAddress", "ManuallyDeactivated")
POSTMARK_HARD_CODES = (1, 100000, 100001)


def _postmark_kind(item: dict) -> str | None:
    record = item.get("RecordType")
    if record == "Bounce":
        if item.get("Type") == "SpamComplaint":
            return "complained"
        hard = item.get("Type") in POSTMARK_HARD_TYPES or item.get("TypeCode") in POSTMARK_HARD_CODES
        return "bounced" if hard else "soft_bounced"
    return {"Delivery": "delivered", "SpamComplaint": "complained", "Open": "opened", "Click": "clicked"}.get(
        str(record)
    )


def parse_postmark(body: bytes) -> Parsed:
    """The event of a Postmark webhook post (one JSON object)."""
    item = _json(body)
    if not isinstance(item, dict):
        raise PayloadError("Postmark posts one JSON object per event")
    kind = _postmark_kind(item)
    if kind is None:
        return Parsed(ignored=1)
    record = str(item.get("RecordType"))
    when = item.get("DeliveredAt") or item.get("BouncedAt") or item.get("ReceivedAt")
    message_id = normalise_message_id(item.get("MessageID"))
    event = ProviderEventIn(
        provider="postmark",
        event_id=f"{record}:{item['ID']}" if _text(item.get("ID")) else _event_hash("postmark", item),
        event=kind,
        message_ids=(message_id,) if message_id else (),
        recipient=_text(item.get("Recipient") or item.get("Email")),
        occurred_at=_from_iso(when),
        detail=_detail(
            type=item.get("Type"),
            type_code=item.get("TypeCode"),
            description=item.get("Description"),
            details=item.get("Details"),
            url=item.get("OriginalLink"),
        ),
    )
    return Parsed(events=[event])
