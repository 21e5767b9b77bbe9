"""Vonage's Messages API: one SMS per message, the second SMS provider (SMS_PROVIDER=twilio,vonage fails over).

`POST {VONAGE_API_BASE}/v1/messages` with `{"message_type": "text", "channel": "sms", "to", "from", "text",
"client_ref"}` (`to` in E.164 digits without "+"; client_ref is the delivery id). Auth: a JWT of the Vonage
application (VONAGE_APPLICATION_ID and its private key, RS256, made by vonage_jwt and renewed before its 15
minutes run out), or Basic auth with VONAGE_API_KEY / VONAGE_API_SECRET when no application is set. One
keep-alive httpx client per process. Answers (RFC 7807 problem documents):

- 202: accepted; its message_uuid is the provider message id.
- 422 naming `to` (an invalid recipient): permanent, kind invalid_number; any other 422 / 400: permanent.
- 402 (low balance): transient, and the dashboard says the account needs credit, until a send works again.
- 401 / 403: permanent, kind misconfigured, on the dashboard.
- 429, 5xx, timeouts and transport errors: transient, with Retry-After (capped at RETRY_CAP_SECONDS) if given.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
from vonage_jwt import JwtClient

from app.providers import httpclients, problems
from app.providers.base import Message, PermanentError, Receipt, TransientError, register
from app.providers.twilio import number_hint
from app.providers.webpush import retry_after

JWT_REUSE_SECONDS = 10 * 60  # vonage_jwt's tokens live 15 minutes: a new one well before Vonage refuses it
ERROR_TEXT_MAX = 300

# What this process told the dashboard (Vonage refuses the account or its configuration).
_noted = problems.Noted("vonage")


@dataclass(frozen=True)
class VonageSettings:
    """What reaching Vonage takes, from the VONAGE_* settings."""

    api_base: str
    sender: str
    timeout: float
    application_id: str = ""
    private_key: str = ""  # PEM text of the application's key
    api_key: str = ""
    api_secret: str = ""


class VonageProvider:
    """Sends each Message's text as one SMS to Message.to through the Messages API."""

    name = "vonage"

    def __init__(self, settings: VonageSettings, retry_cap: float) -> None:
        self.settings = settings
        self.retry_cap = retry_cap
        self._jwt: tuple[float, str] | None = None  # (made at, token)
        self._jwt_lock = threading.Lock()

    @classmethod
    def from_config(cls, config: Mapping) -> VonageProvider | None:
        """Build from VONAGE_*; None until a sender and an application key (or the API key and secret) are set."""
        sender = config["VONAGE_FROM"]
        application, key_file = config["VONAGE_APPLICATION_ID"], config["VONAGE_PRIVATE_KEY_FILE"]
        api_key, api_secret = config["VONAGE_API_KEY"], config["VONAGE_API_SECRET"]
        if not sender or not ((application and key_file) or (api_key and api_secret)):
            return None
        private_key = Path(key_file).read_text() if application and key_file else ""
        settings = VonageSettings(config["VONAGE_API_BASE"], sender, float(config["SMS_TIMEOUT"]),
                                  application if private_key else "", private_key, api_key, api_secret)  # fmt: skip
        return cls(settings, float(config["RETRY_CAP_SECONDS"]))

    def __enter__(self) -> VonageProvider:
        return self

    def __exit__(self, *exc_info) -> None:
        return None

    def send(self, message: Message) -> Receipt:
        """POST one SMS; see the module docstring for how Vonage's answers are classified."""
        if not message.to:
            raise PermanentError("the recipient has no phone number", kind="no_number")
        body = {"message_type": "text", "channel": "sms", "to": message.to.lstrip("+"),
                "from": self.settings.sender.lstrip("+"), "text": message.text,
                "client_ref": str(message.delivery_id)}  # fmt: skip
        url = f"{self.settings.api_base.rstrip('/')}/v1/messages"
        try:
            response = httpclients.shared(self.settings.api_base, self.settings.timeout).post(
                url, json=body, **self._auth()
            )
        except httpx.TimeoutException as exc:
            raise TransientError(f"Vonage did not answer in time ({type(exc).__name__})", kind="timeout") from None
        except httpx.HTTPError as exc:
            raise TransientError(f"Vonage connection: {type(exc).__name__}: {exc}", kind="connection") from None
        if response.status_code == 202:
            _noted.solved()
            return Receipt(self.name, httpclients.json_object(response).get("message_uuid") or "", response_code=202)
        raise self._failure(message.to, response)

    def _auth(self) -> dict:
        settings = self.settings
        if not settings.application_id:
            return {"auth": (settings.api_key, settings.api_secret)}
        with self._jwt_lock:
            if self._jwt is None or time.monotonic() - self._jwt[0] > JWT_REUSE_SECONDS:
                token = JwtClient(settings.application_id, settings.private_key).generate_application_jwt()
                self._jwt = (time.monotonic(), token.decode() if isinstance(token, bytes) else token)
            return {"headers": {"Authorization": f"Bearer {self._jwt[1]}"}}

    def _failure(self, phone: str, response: httpx.Response) -> PermanentError | TransientError:
        """The error for a refused request (module docstring)."""
        status, body = response.status_code, httpclients.json_object(response)
        detail = str(body.get("detail") or body.get("title") or response.text)[:ERROR_TEXT_MAX]
        text = f"Vonage {status} {body.get('title') or ''}: {detail}".replace(phone.lstrip("+"), number_hint(phone))
        if status == 429 or status >= 500:
            wait = retry_after(response.headers.get("Retry-After"), self.retry_cap)
            kind = "rate_limited" if status == 429 else f"http_{status}"
            return TransientError(text, kind=kind, retry_after=wait, response_code=status)
        if status == 402:
            _noted.note(text)
            return TransientError(text, kind="low_balance", response_code=status)
        if status in (401, 403):
            _noted.note(text)
            return PermanentError(text, kind="misconfigured", response_code=status)
        fields = {str(item.get("name")) for item in body.get("invalid_parameters") or () if isinstance(item, dict)}
        if status == 422 and "to" in fields:
            return PermanentError(text, kind="invalid_number", response_code=status)
        return PermanentError(text, kind=f"http_{status}", response_code=status)


register("vonage")(VonageProvider.from_config)
