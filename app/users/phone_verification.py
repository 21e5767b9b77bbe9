"""A member proves a phone number is theirs: a 6-digit code by SMS, typed back on the preferences page.

The code goes through the delivery engine like any SMS, on the high queue, as a row of the built-in
phone_verification type (app/notification_types/builtin.py). The number is not the member's yet, so the row
cannot go to users.phone: phone_verifications names the row (delivery_id) and the number, and the SMS channel
sends a row of that type only to the number of the verification that names it (nothing else reaches an
unverified number: a product cannot make such a row through the API, and a replaced code's row finds nothing).

The code itself is stored nowhere: the row keeps a random seed (secrets), and the code is HMAC(SECRET_KEY, seed)
reduced to 6 digits, worked out when the SMS is built and when the member types it. The ledger keeps the SMS
with the code masked. A code expires CODE_TTL after it was asked for (the database's clock) and allows CODE_TRIES
wrong guesses; sends are limited per member and per number (PHONE_CODE_USER_RATE_LIMIT, PHONE_CODE_NUMBER_RATE_LIMIT).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from flask import current_app
from limits import parse_many

from app import phones
from app.extensions import REALTIME_ERRORS, db, limiter
from app.notification_types.builtin import PHONE_VERIFICATION, ensure_phone_verification
from app.queueing import enqueue_deliveries_after_commit

log = logging.getLogger(__name__)

CODE_DIGITS = 6
CODE_TTL = timedelta(minutes=10)
CODE_TRIES = 5
SEED_BYTES = 16
MASKED_CODE = "•" * CODE_DIGITS
QUEUE = "high"  # a member is waiting for it, whatever runs on the other queues

# One statement: the hidden notification that anchors the row, the SMS ledger row, and the verification that
# names both the row and the number (replacing the member's earlier one, so an older code stops working).
SEND_SQL = sa.text(
    """
WITH n AS (
  INSERT INTO notifications (user_id, type, title, body, dedupe_key, in_app, read_at)
  VALUES (:user_id, :type, :title, '', :dedupe_key, false, now())
  RETURNING id, user_id),
d AS (
  INSERT INTO notification_deliveries (notification_id, user_id, channel, status, next_attempt_at)
  SELECT id, user_id, 'sms', 'pending', now() FROM n
  RETURNING id, user_id)
INSERT INTO phone_verifications (user_id, phone, seed, tries_left, expires_at, delivery_id)
SELECT user_id, :phone, :seed, :tries, now() + make_interval(secs => :ttl), id FROM d
ON CONFLICT (user_id) DO UPDATE
SET phone = EXCLUDED.phone, seed = EXCLUDED.seed, tries_left = EXCLUDED.tries_left,
    expires_at = EXCLUDED.expires_at, delivery_id = EXCLUDED.delivery_id, created_at = now()
RETURNING delivery_id, expires_at
"""
)
PENDING_SQL = sa.text(
    """
SELECT phone, seed, tries_left, expires_at, expires_at > now() AS live
FROM phone_verifications WHERE user_id = :user_id FOR UPDATE
"""
)
SPEND_TRY_SQL = sa.text("UPDATE phone_verifications SET tries_left = tries_left - 1 WHERE user_id = :user_id")
# The number becomes the member's, verified now; a provider's earlier refusal was about another number or is
# answered by the member receiving this code.
VERIFIED_SQL = sa.text(
    """
WITH done AS (DELETE FROM phone_verifications WHERE user_id = :user_id RETURNING user_id)
UPDATE users SET phone = :phone, phone_verified_at = now(), phone_invalidated_at = NULL, phone_invalid_reason = NULL
WHERE id IN (SELECT user_id FROM done)
"""
)
REMOVE_SQL = sa.text(
    """
WITH gone AS (DELETE FROM phone_verifications WHERE user_id = :user_id)
UPDATE users SET phone = NULL, phone_verified_at = NULL, phone_invalidated_at = NULL, phone_invalid_reason = NULL
WHERE id = :user_id
"""
)
# Consent changes once per real change, each recorded in sms_consents with its source (the law asks for a record).
CONSENT_SQL = sa.text(
    """
WITH changed AS (
  UPDATE users SET sms_opt_in = :on, sms_opt_in_at = now(), sms_consent_source = 'member'
  WHERE id = :user_id AND sms_opt_in <> :on
  RETURNING id, phone)
INSERT INTO sms_consents (user_id, phone, opted_in, source, detail)
SELECT id, phone, :on, 'member', 'preferences page' FROM changed
"""
)
STATE_SQL = sa.text(
    """
SELECT u.phone, u.phone_verified_at, u.phone_invalidated_at, u.phone_invalid_reason, u.sms_opt_in,
       u.sms_opt_in_at, u.sms_consent_source, v.phone AS pending_phone, v.tries_left,
       v.expires_at AS pending_expires_at, v.expires_at > now() AS pending_live
FROM users u LEFT JOIN phone_verifications v ON v.user_id = u.id
WHERE u.id = :user_id
"""
)
# The numbers that verification rows go to: only a live verification that names the row, to a number that has
# not replied STOP since the code was asked for (app/hooks/sms_events.py).
TARGETS_SQL = sa.text(
    """
SELECT v.delivery_id, v.phone, v.seed FROM phone_verifications v
WHERE v.user_id = ANY(CAST(:users AS bigint[])) AND v.delivery_id = ANY(CAST(:ids AS bigint[]))
  AND v.expires_at > now() AND NOT EXISTS (SELECT 1 FROM sms_suppressions s WHERE s.phone = v.phone)
"""
)
STOPPED_SQL = sa.text("SELECT EXISTS (SELECT 1 FROM sms_suppressions WHERE phone = :phone)")


class TooManyCodes(Exception):
    """Codes for this member or this number were asked for too often; retry_after seconds until the next."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many codes; retry after {retry_after} s")
        self.retry_after = retry_after


@dataclass(frozen=True)
class Sent:
    """A code on its way: the number it goes to, its ledger row and when it expires."""

    phone: str
    delivery_id: int
    expires_at: datetime


@dataclass(frozen=True)
class Checked:
    """What a typed code did: verified | wrong (tries_left) | used_up | expired | none | malformed."""

    outcome: str
    tries_left: int = 0
    phone: str | None = None


@dataclass(frozen=True)
class Target:
    """Where a verification row's SMS goes, and the seed its code comes from."""

    phone: str
    seed: bytes


@dataclass(frozen=True)
class PhoneState:
    """What the preferences page shows about a member's number, its code in flight and their consent."""

    phone: str | None
    verified: bool
    invalid_reason: str | None
    sms_opt_in: bool
    consent_source: str | None
    consent_at: datetime | None
    pending_phone: str | None
    tries_left: int
    pending_expires_at: datetime | None


def code_for(secret_key: str, seed: bytes) -> str:
    """The 6-digit code a seed stands for (HMAC-SHA256 under the server's key; bias below one in 10**13)."""
    digest = hmac.new(secret_key.encode(), b"hato-phone-code\x00" + seed, hashlib.sha256).digest()
    return str(int.from_bytes(digest[:8], "big") % 10**CODE_DIGITS).zfill(CODE_DIGITS)


def _limit_ids(kind: str, value: object) -> tuple[str, ...]:
    prefix = current_app.config["RATELIMIT_KEY_PREFIX"]  # the installation's namespace
    return (prefix, kind, str(value)) if prefix else (kind, str(value))


def _take_send_slot(user_id: int, phone: str) -> None:
    """Count one send against the member's and the number's limits, or raise TooManyCodes (counting nothing)."""
    config = current_app.config
    if not config["RATELIMIT_ENABLED"]:
        return
    windows = [
        (item, _limit_ids("phone-code-user", user_id)) for item in parse_many(config["PHONE_CODE_USER_RATE_LIMIT"])
    ]
    windows += [(item, _limit_ids("phone-code-number", phone))
                for item in parse_many(config["PHONE_CODE_NUMBER_RATE_LIMIT"])]  # fmt: skip
    strategy = limiter.limiter
    try:
        full = [(item, ids) for item, ids in windows if not strategy.test(item, *ids)]
        if full:
            resets = [strategy.get_window_stats(item, *ids).reset_time for item, ids in full]
            raise TooManyCodes(max(1, int(max(resets) - time.time())))
        for item, ids in windows:
            strategy.hit(item, *ids)
    except REALTIME_ERRORS as exc:  # the counters live in the realtime store (maybe a cluster mid-failover)
        # Every SMS costs money and can be aimed at a stranger's phone: without the counters, no send.
        log.warning("phone code limits unavailable, refusing the send: %s", exc)
        raise TooManyCodes(60) from exc


def send_code(user_id: int, raw_phone: str, region: str) -> Sent:
    """Send a new code to the number typed (read in region when national); raises InvalidPhone or TooManyCodes.

    The caller commits; the row is enqueued on the high queue after the commit.
    """
    phone = phones.normalise(raw_phone, region)
    if db.session.execute(STOPPED_SQL, {"phone": phone}).scalar():
        raise phones.InvalidPhone("stopped")  # a code would be refused anyway: say why before spending a slot
    _take_send_slot(user_id, phone)
    ensure_phone_verification()
    params = {
        "user_id": user_id,
        "type": PHONE_VERIFICATION,
        "title": "Phone number verification",
        "dedupe_key": f"phone-verification:{secrets.token_hex(16)}",
        "phone": phone,
        "seed": secrets.token_bytes(SEED_BYTES),
        "tries": CODE_TRIES,
        "ttl": CODE_TTL.total_seconds(),
    }
    row = db.session.execute(SEND_SQL, params).one()
    enqueue_deliveries_after_commit(QUEUE, "sms", [row.delivery_id])
    log.info("phone code sent for user %s to %s (delivery %s)", user_id, phones.mask(phone), row.delivery_id)
    return Sent(phone, row.delivery_id, row.expires_at)


def check_code(user_id: int, typed: str, secret_key: str) -> Checked:
    """Check a typed code against the member's code in flight; the right one makes its number theirs, verified."""
    code = "".join((typed or "").split())
    if len(code) != CODE_DIGITS or not code.isascii() or not code.isdigit():
        return Checked("malformed")
    pending = db.session.execute(PENDING_SQL, {"user_id": user_id}).first()
    if pending is None:
        return Checked("none")
    if not pending.live:
        return Checked("expired", phone=pending.phone)
    if pending.tries_left <= 0:
        return Checked("used_up", phone=pending.phone)
    if hmac.compare_digest(code_for(secret_key, bytes(pending.seed)), code):
        db.session.execute(VERIFIED_SQL, {"user_id": user_id, "phone": pending.phone})
        return Checked("verified", phone=pending.phone)
    db.session.execute(SPEND_TRY_SQL, {"user_id": user_id})
    left = pending.tries_left - 1
    return Checked("wrong" if left else "used_up", tries_left=left, phone=pending.phone)


def remove_number(user_id: int) -> None:
    """Forget the member's number and any code in flight (consent stays as it is: it is about SMS, not a number)."""
    db.session.execute(REMOVE_SQL, {"user_id": user_id})


def set_consent(user_id: int, on: bool) -> bool:
    """Give or withdraw the member's consent to SMS (source member); return whether it changed."""
    return db.session.execute(CONSENT_SQL, {"user_id": user_id, "on": on}).rowcount > 0


def state(user_id: int) -> PhoneState:
    """The member's number, whether it is verified (and not refused), their consent and any live code in flight."""
    row = db.session.execute(STATE_SQL, {"user_id": user_id}).one()
    live = bool(row.pending_live)
    return PhoneState(
        phone=row.phone,
        verified=row.phone is not None and row.phone_verified_at is not None and row.phone_invalidated_at is None,
        invalid_reason=row.phone_invalid_reason if row.phone_invalidated_at is not None else None,
        sms_opt_in=row.sms_opt_in,
        consent_source=row.sms_consent_source,
        consent_at=row.sms_opt_in_at,
        pending_phone=row.pending_phone if live and row.tries_left else None,
        tries_left=row.tries_left or 0,
        pending_expires_at=row.pending_expires_at if live else None,
    )


def targets(rows) -> dict[int, Target]:
    """The number and seed of each verification row whose verification is still live and names it (one read)."""
    rows = [row for row in rows if row.type == PHONE_VERIFICATION]
    if not rows:
        return {}
    params = {"users": sorted({row.user_id for row in rows}), "ids": [row.id for row in rows]}
    return {r.delivery_id: Target(r.phone, bytes(r.seed)) for r in db.session.execute(TARGETS_SQL, params)}
