"""Who sent a provider webhook: each provider's own authentication, checked before any event is read.

- SendGrid: an ECDSA P-256 / SHA-256 signature (base64 DER, header X-Twilio-Email-Event-Webhook-Signature)
  over the timestamp header (X-Twilio-Email-Event-Webhook-Timestamp) followed by the raw body, checked with
  SENDGRID_WEBHOOK_PUBLIC_KEY; a timestamp further than HOOK_MAX_AGE_SECONDS from now is a replay.
- Mailgun: the body's `signature` object: HMAC-SHA256 of timestamp + token with MAILGUN_WEBHOOK_SIGNING_KEY
  (hex); a timestamp further than HOOK_MAX_AGE_SECONDS from now, or a token already seen (Redis SET NX,
  kept twice that long), is a replay. The signature travels inside the JSON body, so that body is decoded
  first, but none of its events is read until the signature holds.
- Postmark: HTTP basic auth on the hook URL (POSTMARK_WEBHOOK_USER / _PASSWORD), compared in constant time.

A refusal is 401 (nothing that could authenticate the request) or 403 (a wrong signature, a replay);
the view answers it as problem+json and changes nothing.
"""

from __future__ import annotations

import hashlib
import hmac
from base64 import b64decode
from binascii import Error as Base64Error
from collections.abc import Callable, Mapping
from functools import lru_cache

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from flask_babel import lazy_gettext as _l

from app.config import load_p256_public_key
from app.hooks.formats import MailgunSignature

SENDGRID_SIGNATURE = "X-Twilio-Email-Event-Webhook-Signature"
SENDGRID_TIMESTAMP = "X-Twilio-Email-Event-Webhook-Timestamp"


class Refused(Exception):
    """The request is not from the provider (or is a replay): the status and a sentence saying why."""

    def __init__(self, status: int, detail, headers: dict | None = None) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail
        self.headers = headers or {}


@lru_cache(maxsize=8)
def _sendgrid_key(text: str):
    return load_p256_public_key(text)


def _check_age(timestamp: str, now: float, max_age: float) -> None:
    try:
        sent_at = int(timestamp.strip())
    except (ValueError, AttributeError):
        raise Refused(403, _l("The webhook timestamp is not a number of seconds.")) from None
    if abs(now - sent_at) > max_age:
        raise Refused(403, _l("The webhook timestamp is too old (or in the future): a replay is refused."))


def verify_sendgrid(public_key: str, headers: Mapping[str, str], body: bytes, now: float, max_age: float) -> None:
    """Check SendGrid's ECDSA signature over timestamp + body, then the timestamp's age; raise Refused."""
    signature, timestamp = headers.get(SENDGRID_SIGNATURE), headers.get(SENDGRID_TIMESTAMP)
    if not signature or not timestamp:
        raise Refused(401, _l("The request carries no SendGrid signature."))
    key = _sendgrid_key(public_key)
    if key is None:  # the start-up check refuses such a key; never accept anything without one
        raise Refused(403, _l("The signature does not match."))
    try:
        key.verify(b64decode(signature.strip(), validate=True), timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, Base64Error, ValueError):
        raise Refused(403, _l("The signature does not match.")) from None
    _check_age(timestamp, now, max_age)


def verify_mailgun(signing_key: str, signed: MailgunSignature, now: float, max_age: float,
                   claim_token: Callable[[str, float], bool]) -> None:  # fmt: skip
    """Check Mailgun's HMAC of timestamp + token, the timestamp's age, then that the token is new; raise Refused.

    signed is the post's signature object (app/hooks/formats.py); claim_token(token, ttl_seconds) records the
    token and says whether it was new (app/hooks/service.py).
    """
    timestamp, token, signature = signed.timestamp, signed.token, signed.signature
    expected = hmac.new(signing_key.encode(), f"{timestamp}{token}".encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature.strip().lower()):
        raise Refused(403, _l("The signature does not match."))
    _check_age(timestamp, now, max_age)
    if not claim_token(token, max_age * 2):
        raise Refused(403, _l("This webhook token was used before: a replay is refused."))


def verify_postmark(user: str, password: str, authorization) -> None:
    """Check the basic auth Postmark sends (werkzeug's request.authorization) in constant time; raise Refused."""
    challenge = {"WWW-Authenticate": 'Basic realm="hato-hooks"'}
    if authorization is None or authorization.type != "basic":
        raise Refused(401, _l("Send the user name and password of the hook URL (HTTP basic auth)."), challenge)
    given_user = (authorization.username or "").encode()
    given_password = (authorization.password or "").encode()
    # Both comparisons always run, so the time taken says nothing about which part was wrong.
    user_ok = hmac.compare_digest(given_user, user.encode())
    password_ok = hmac.compare_digest(given_password, password.encode())
    if not (user_ok and password_ok):
        raise Refused(401, _l("The user name or password of the hook URL is wrong."), challenge)
