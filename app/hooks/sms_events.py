"""SMS status and replies in: store each status once, matched to its SMS delivery, and act on STOP, START and HELP.

Status events (app/hooks/twilio.py, vonage.py) follow the e-mail path's rules (app/hooks/service.py), on SMS
deliveries only and never touching e-mail suppressions:
1. their deliveries are found by the message id recorded at send time (Twilio's Message SID, Vonage's
   message_uuid: notification_deliveries_message_idx);
2. they go into provider_events once each (ON CONFLICT: providers resend), unknown ids stored and counted;
3. only the events just stored act: provider_status rises (sent < delivered < read; canceled, undelivered and
   failed final); a failure whose error code is the send-time "invalid number" marks the number invalid, and an
   "unsubscribed recipient" withdraws that member's consent (app/users/sms.py), as the send-time answers do.

Replies: STOP and its like suppress the number and withdraw every member's consent there (source keyword);
START and UNSTOP lift it (app/users/sms.py says whose consent comes back); HELP is answered with SMS_HELP_TEXT.
A keyword acts once per provider message id (remembered in Redis for REPLY_MEMORY_SECONDS): Twilio's signature
has no time in it, so a captured STOP posted again after the member's START would otherwise undo it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping

import sqlalchemy as sa

from app import keyspace
from app.extensions import db, redis
from app.hooks import service
from app.hooks.formats import ProviderEventIn
from app.hooks.sms_formats import InboundSms, keyword
from app.models import PROVIDER_STATUSES
from app.phones import mask
from app.providers import Message, PermanentError, TransientError
from app.providers.vonage import VonageProvider
from app.users import sms as sms_users
from app.webhooks import service as webhooks

log = logging.getLogger(__name__)

REPLY_MEMORY_SECONDS = 7 * 86_400

DELIVERIES_SQL = sa.text(
    """
SELECT btrim(d.provider_message_id, '<>') AS message_id, d.id, d.user_id
FROM notification_deliveries d
WHERE btrim(d.provider_message_id, '<>') = ANY(CAST(:message_ids AS text[]))
  AND d.provider_message_id IS NOT NULL AND d.channel = 'sms'
ORDER BY d.id
"""
)

# What an event makes of its delivery's provider_status (queued: recorded only, Hato counted it sent already).
STATUS_OF = {"sent": "sent", "delivered": "delivered", "read": "read", "canceled": "canceled",
             "undelivered": "undelivered", "failed": "failed"}  # fmt: skip


def record(events: list[ProviderEventIn], recipient_errors: Mapping[str, str]) -> dict:
    """Store the status events once each and apply the new ones; the counts for the answer.

    recipient_errors maps the provider's error codes onto the send-time kinds invalid_number / unsubscribed.
    """
    counts = {"received": len(events), "recorded": 0, "duplicates": 0, "unknown": 0}
    if not events:
        return counts
    ids = sorted({m for event in events for m in event.message_ids})
    found: dict[str, tuple[int, int]] = {}
    for row in db.session.execute(DELIVERIES_SQL, {"message_ids": ids}):
        found.setdefault(row.message_id, (row.id, row.user_id))
    matched = [(event, found.get(event.message_id)) for event in events]
    params = {
        "delivery_ids": [m[0] if m else None for _, m in matched],
        "user_ids": [m[1] if m else None for _, m in matched],
        "providers": [event.provider for event, _ in matched],
        "event_ids": [event.event_id for event, _ in matched],
        "events": [event.event for event, _ in matched],
        "message_ids": [event.message_id for event, _ in matched],
        # The number is shown masked in the console's timeline; the error code stays for whoever looks.
        "details": [
            json.dumps({**event.detail, "recipient": mask(event.recipient) if event.recipient else ""})
            for event, _ in matched
        ],  # fmt: skip
        "occurred": [event.occurred_at for event, _ in matched],
    }
    new_ids = set(db.session.execute(service.INSERT_SQL, params).scalars())
    fresh = []
    for event, match in matched:
        if event.event_id in new_ids:
            new_ids.discard(event.event_id)  # the same event twice in one request acts once
            fresh.append((event, match))
    counts["recorded"] = len(fresh)
    counts["duplicates"] = len(events) - len(fresh)
    counts["unknown"] = sum(1 for _, match in fresh if match is None)
    _apply([(event, match) for event, match in fresh if match is not None], recipient_errors)
    return counts


def _apply(fresh: list[tuple[ProviderEventIn, tuple[int, int]]], recipient_errors: Mapping[str, str]) -> None:
    statuses: dict[int, tuple[str, object]] = {}
    for event, (delivery_id, _) in fresh:
        status = STATUS_OF.get(event.event)
        current = statuses.get(delivery_id)
        if status and (current is None or PROVIDER_STATUSES.index(current[0]) < PROVIDER_STATUSES.index(status)):
            statuses[delivery_id] = (status, event.occurred_at)
    if statuses:
        ids = sorted(statuses)
        db.session.execute(service.STATUS_SQL, {"ids": ids, "statuses": [statuses[i][0] for i in ids],
                                                "ats": [statuses[i][1] for i in ids],
                                                "order": list(PROVIDER_STATUSES)})  # fmt: skip
    for event, (_, user_id) in fresh:
        kind = recipient_errors.get(event.detail.get("error_code", ""))
        why = f"{event.provider} {event.event} {event.detail.get('error_code', '')}".strip()
        if kind == "invalid_number":
            sms_users.mark_invalid(db.session, user_id, event.recipient, why)
        elif kind == "unsubscribed":
            sms_users.withdraw(db.session, user_id, "keyword", why)
    delivered = [
        {"delivery_id": delivery_id, "user_id": user_id, "provider": event.provider, "message_id": event.message_id,
         "occurred_at": event.occurred_at.isoformat()}
        for event, (delivery_id, user_id) in fresh if event.event == "delivered"
    ]  # fmt: skip
    if delivered:
        webhooks.emit_many("delivery.delivered", delivered)


def _reply_key(inbound: InboundSms) -> str:
    digest = hashlib.sha256(f"{inbound.provider}:{inbound.message_id}".encode()).hexdigest()
    return keyspace.key("hooks", "sms-reply", digest)


def release_reply(inbound: InboundSms) -> None:
    """Forget a reply whose effects were not committed after all, so the provider's retry of it acts."""
    redis.client().delete(_reply_key(inbound))


def reply(inbound: InboundSms) -> str | None:
    """Act on a reply's keyword in the caller's transaction: stop, start or help (answered by the caller); None.

    A reply already acted on (the same message id) is None. Raises RedisError when the replay check cannot run;
    the caller gives the claim back (release_reply) if its transaction does not commit.
    """
    word = keyword(inbound.text)
    if word is None or not inbound.phone:
        return None  # a conversation, or a sender that is no phone number: nothing to change
    if not redis.client().set(_reply_key(inbound), b"1", nx=True, ex=REPLY_MEMORY_SECONDS):
        log.info("SMS reply %s from %s was acted on before: ignored", inbound.message_id, mask(inbound.phone))
        return None
    detail = f"{inbound.provider} {inbound.message_id}: {inbound.text.strip()[:20]}"
    if word == "stop":
        members = sms_users.stop_number(db.session, inbound.phone, inbound.provider, detail)
        log.info("SMS reply STOP from %s: %d member(s) withdrawn", mask(inbound.phone), len(members))
    elif word == "start":
        members = sms_users.start_number(db.session, inbound.phone, detail)
        log.info("SMS reply START from %s: %d member(s) restored", mask(inbound.phone), len(members))
    return word


def send_help(config: Mapping, inbound: InboundSms) -> bool:
    """Answer HELP with the help text as an SMS through Vonage (whose webhook has no reply of its own); sent?"""
    provider = VonageProvider.from_config(config)
    if provider is None:
        log.warning("SMS reply HELP from %s: Vonage cannot send (VONAGE_FROM and credentials)", mask(inbound.phone))
        return False
    try:
        provider.send(Message(delivery_id=0, channel="sms", to=inbound.phone, subject="",
                              text=config["SMS_HELP_TEXT"]))  # fmt: skip
    except (PermanentError, TransientError) as exc:
        log.warning("SMS reply HELP from %s: Vonage did not take the answer: %s", mask(inbound.phone), exc)
        return False
    return True
