"""Twilio's Programmable Messaging: one SMS per message through the REST Messages API.

`POST {TWILIO_API_BASE}/2010-04-01/Accounts/<TWILIO_ACCOUNT_SID>/Messages.json`, form-encoded, with HTTP Basic
auth (the account SID and TWILIO_AUTH_TOKEN), `To` (E.164), `Body`, and `MessagingServiceSid` when
TWILIO_MESSAGING_SERVICE_SID is set (Twilio picks the sender), else `From` (TWILIO_FROM), and `StatusCallback`
= BASE_URL + /hooks/providers/twilio, where Twilio posts the message's statuses (app/hooks). One keep-alive
httpx client per process, shared by its threads. Answers, by Twilio's documented error codes:

- 201: queued at Twilio; the Message sid (SM…) is the provider message id.
- 21211 (invalid To): permanent, kind invalid_number (the channel marks the number invalid).
- 21610 (the recipient replied STOP to this sender): permanent, kind unsubscribed (the channel suppresses it).
- 21408 (sending to that region is not enabled), and any other 4xx: permanent.
- HTTP 429 or 20429 (too many requests), 5xx, timeouts and transport errors: transient, with Retry-After
  (strictly parsed, capped at RETRY_CAP_SECONDS) when given.
- 401 / 20003 (the SID and token do not authenticate) and 20404 for the account itself: permanent, kind
  misconfigured, noted for the dashboard (app/providers/problems.py) until a send works again.

Phone numbers are the member's: the logs name only their last digits.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

import httpx

from app.providers import httpclients, problems
from app.providers.base import Message, PermanentError, Receipt, TransientError, register
from app.providers.webpush import retry_after

log = logging.getLogger(__name__)

# Twilio's error codes (https://www.twilio.com/docs/api/errors) that say something about the recipient.
RECIPIENT_ERRORS = {21211: "invalid_number", 21610: "unsubscribed", 21408: "region_not_enabled", 21614: "not_mobile"}
RATE_LIMITED = 20429
MISCONFIGURED = (20003, 20404, 21606, 21659)  # wrong SID/token, unknown account, a From that is not the account's
ERROR_TEXT_MAX = 300
STATUS_CALLBACK_PATH = "/hooks/providers/twilio"  # app/hooks/views.py twilio_status

# What this process told the dashboard (Twilio refuses the configuration).
_noted = problems.Noted("twilio")


@dataclass(frozen=True)
class TwilioSettings:
    """What reaching Twilio takes, from the TWILIO_* settings."""

    account_sid: str
    auth_token: str
    sender: tuple[str, str]  # ("MessagingServiceSid", "MG…") or ("From", "+1…")
    api_base: str
    timeout: float
    status_callback: str = ""  # where Twilio posts the message's statuses ('' : nowhere)

    @property
    def url(self) -> str:
        """The account's Messages resource."""
        return f"{self.api_base.rstrip('/')}/2010-04-01/Accounts/{quote(self.account_sid, safe='')}/Messages.json"


def number_hint(phone: str) -> str:
    """A number as logs may show it: its last four digits."""
    return f"…{phone[-4:]}" if len(phone) > 4 else "…"


class TwilioProvider:
    """Sends each Message's text as one SMS (Twilio splits and joins its parts) to Message.to."""

    name = "twilio"

    def __init__(self, settings: TwilioSettings, retry_cap: float) -> None:
        self.settings = settings
        self.retry_cap = retry_cap

    @classmethod
    def from_config(cls, config: Mapping) -> TwilioProvider | None:
        """Build from TWILIO_*; None until the SID, the token and a sender are all set."""
        sid, token = config["TWILIO_ACCOUNT_SID"], config["TWILIO_AUTH_TOKEN"]
        service, number = config["TWILIO_MESSAGING_SERVICE_SID"], config["TWILIO_FROM"]
        if not (sid and token and (service or number)):
            return None
        sender = ("MessagingServiceSid", service) if service else ("From", number)
        callback = config["BASE_URL"].rstrip("/") + STATUS_CALLBACK_PATH
        settings = TwilioSettings(sid, token, sender, config["TWILIO_API_BASE"], float(config["SMS_TIMEOUT"]), callback)
        return cls(settings, float(config["RETRY_CAP_SECONDS"]))

    def __enter__(self) -> TwilioProvider:
        return self  # the client is the process's, kept across batches

    def __exit__(self, *exc_info) -> None:
        return None

    def send(self, message: Message) -> Receipt:
        """POST one message; see the module docstring for how Twilio's answers are classified."""
        if not message.to:
            raise PermanentError("the recipient has no phone number", kind="no_number")
        settings = self.settings
        form = {"To": message.to, "Body": message.text, settings.sender[0]: settings.sender[1]}
        if settings.status_callback:
            form["StatusCallback"] = settings.status_callback
        try:
            response = httpclients.shared(settings.api_base, settings.timeout).post(
                settings.url, data=form, auth=(settings.account_sid, settings.auth_token)
            )
        except httpx.TimeoutException as exc:
            raise TransientError(f"Twilio did not answer in time ({type(exc).__name__})", kind="timeout") from None
        except httpx.HTTPError as exc:
            raise TransientError(f"Twilio connection: {type(exc).__name__}: {exc}", kind="connection") from None
        if response.status_code in (200, 201):
            _noted.solved()
            return Receipt(
                self.name, httpclients.json_object(response).get("sid") or "", response_code=response.status_code
            )
        raise self._failure(message.to, response)

    def _failure(self, phone: str, response: httpx.Response) -> PermanentError | TransientError:
        """The error for a refused request (module docstring)."""
        status, body = response.status_code, httpclients.json_object(response)
        code = body.get("code") if isinstance(body.get("code"), int) else None
        detail = str(body.get("message") or response.text)[:ERROR_TEXT_MAX].replace(phone, number_hint(phone))
        text = f"Twilio {status} {code or ''}: {detail}".replace("  ", " ")
        if status == 429 or code == RATE_LIMITED or status >= 500:
            wait = retry_after(response.headers.get("Retry-After"), self.retry_cap)
            kind = "rate_limited" if status == 429 or code == RATE_LIMITED else f"http_{status}"
            return TransientError(text, kind=kind, retry_after=wait, response_code=status)
        if code in RECIPIENT_ERRORS:
            log.info("Twilio refused %s: %s", number_hint(phone), code)
            return PermanentError(text, kind=RECIPIENT_ERRORS[code], response_code=status)
        if status == 401 or code in MISCONFIGURED:
            log.warning("Twilio refuses Hato's configuration: %s", text)
            _noted.note(text)
            return PermanentError(text, kind="misconfigured", response_code=status)
        return PermanentError(text, kind=f"twilio_{code}" if code else f"http_{status}", response_code=status)


register("twilio")(TwilioProvider.from_config)
