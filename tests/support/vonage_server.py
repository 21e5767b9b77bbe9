"""A local Vonage for tests: the Messages API's send endpoint for SMS, and its signed status and inbound webhooks.

VonageServer runs a threaded HTTP/1.1 server on 127.0.0.1 that owns one Vonage "application" (an RSA key pair,
the private key written to a PEM file) and one account (api key, api secret, signature secret, a number to send
from). `settings()` gives the VONAGE_* settings that reach it.

The same port speaks plain HTTP and TLS: the first byte of a connection tells them apart. Plain HTTP is what
VONAGE_API_BASE names; TLS is for the official SDK, whose HttpClient always builds `https://{api_host}{path}`
(vonage_http_client/http_client.py: make_request) and mounts its adapter for https:// only, so it cannot speak
plain HTTP. The certificate comes from a trustme CA whose PEM is VONAGE_CA_FILE.

POST /v1/messages (Vonage's Messages API v1, as developer.vonage.com/en/api/messages describes it):
- auth: `Authorization: Bearer <JWT>` (RS256, signed by the application's private key, claims application_id,
  iat, jti, exp, as vonage_jwt.JwtClient makes them) or `Authorization: Basic base64(api_key:api_secret)`;
  anything else is a 401 application/problem+json.
- body: {"message_type": "text", "channel": "sms", "to", "from", "text", "client_ref"?, "ttl"?, "sms"?,
  "webhook_url"?}; `to` in E.164 without "+" or "00" (7-15 digits). A body Vonage would refuse is a 422 problem
  naming the field, listed in `rejected`.
- an accepted message is a 202 {"message_uuid"} and is in `received`; `script(to, error, ...)` makes one
  recipient's sends answer with one of SEND_ERRORS instead, and chooses the outcome its status webhook reports.

Status webhooks: when a status URL is set (the application's, or the message's own webhook_url), a background
thread POSTs `submitted` and then the final status (delivered, rejected or undeliverable with an error object
whose title is a code of DELIVERY_ERRORS) as Messages API v1 JSON, signed like Vonage's signed webhooks:
`Authorization: Bearer <JWT HS256 with the signature secret>` with claims iat, jti, iss "Vonage", payload_hash
(SHA-256 hex of the body bytes), api_key and application_id (when the send used the application's JWT).
The app's answers are recorded in `webhooks`. `inbound(url, from_, text)` POSTs an inbound SMS signed the same way.

Run on its own (`make run`), it serves until SIGTERM or Ctrl-C, keeping its CA, certificate, application key and
secrets in a directory across restarts and writing the VONAGE_* settings there:

    python -m tests.support.vonage_server --port 2200 --dir var/vonage     # then read var/vonage/settings.json
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import math
import queue
import re
import secrets
import shutil
import socket
import ssl
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jwt
import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support import standalone

SEND_PATH = "/v1/messages"
E164 = re.compile(r"^[1-9]\d{6,14}$")  # vonage_utils.types.PhoneNumber and the API's ToNumber: no "+", no "00"
SENDER_ID = re.compile(r"^(?:[1-9]\d{6,14}|[A-Za-z0-9 ]{1,11})$")  # a number, or an alphanumeric sender id
MAX_TEXT = 3200
MAX_CLIENT_REF = 100
TTL_RANGE = (20, 604_800)
PRICE_PER_SEGMENT = "0.0333"  # the docs' example price (EUR) of one SMS
ERRORS_DOC = "https://developer.vonage.com/api-errors"
MESSAGES_ERRORS_DOC = "https://developer.vonage.com/api-errors/messages"


@dataclass(frozen=True)
class SendError:
    """One answer of POST /v1/messages that is not a 202: its status and RFC 7807 body (instance added per answer)."""

    status: int
    type: str
    title: str
    detail: str
    invalid_parameters: tuple[tuple[str, str], ...] = ()


# The refusals a script can choose, by name. Shapes: the API reference's responses (401, 402, 422, 429, 500)
# and the generic codes of developer.vonage.com/api-errors; "invalid-params" is the body vonage-python-sdk's own
# tests use (messages/tests/data/invalid_error.json). 503 is not among the Messages API's documented answers;
# it stands for an outage in front of it (the SDK raises its plain HttpRequestError for it).
SEND_ERRORS: dict[str, SendError] = {
    "unauthorized": SendError(401, f"{ERRORS_DOC}#unauthorized", "Unauthorized",
                              "You did not provide correct credentials."),
    "low-balance": SendError(402, f"{ERRORS_DOC}#low-balance", "Low balance",
                             "This request could not be performed due to your account balance being low."),
    "invalid-params": SendError(422, f"{MESSAGES_ERRORS_DOC}#1150", "Invalid params",
                                "The value of one or more parameters is invalid.", (("to", "invalid value"),)),
    "throttled": SendError(429, f"{ERRORS_DOC}#throttled", "Rate Limit Hit",
                           "You have hit the rate limit for the API. Please wait, then retry your request."),
    "internal": SendError(500, f"{MESSAGES_ERRORS_DOC}#1030", "Internal error",
                          "There was an error processing your request in the Platform."),
    "unavailable": SendError(503, f"{ERRORS_DOC}#service-unavailable", "Service Unavailable",
                             "The service is temporarily unavailable. Please retry later."),
}  # fmt: skip

# Codes a status webhook's error can carry (the Messages API's error list, x-errors of its OpenAPI document);
# the SMS DLR mapping sends expired messages as 1360 and unknown failures as 1330.
DELIVERY_ERRORS: dict[str, str] = {
    "1050": "Number barred - The number you are trying to submit to is blacklisted and may not receive messages.",
    "1170": "Invalid recipient - The to parameter is missing or contains an invalid address or identifier.",
    "1180": "Destination temporarily unavailable - The destination cannot currently receive messages. Retry later.",
    "1190": "Absent Subscriber Permanent - to is no longer active, You should remove this phone number from your "
            "database.",
    "1210": "Anti-Spam Rejection - Carriers often apply restrictions that block messages following different "
            "criteria. For example on SenderID or message content.",
    "1220": "Handset Busy - The handset associated with to was not available when this message was sent.",
    "1230": "Temporary network failure - The message could not be delivered due to a network issue. Retry later.",
    "1240": "Illegal Number - You tried to send a message to a blacklisted phone number. That is, the user has "
            "already sent a STOP opt-out message and no longer wishes to receive messages from you.",
    "1250": "Unroutable - The chosen route to send your message is not available.",
    "1280": "Number Blocked by Carrier - The carrier blocked this message.",
    "1330": "Delivery failed - The provider returned an unknown permanent failure. Verify the destination and "
            "retry if appropriate.",
    "1331": "Provider error - The provider is not responding or unable to process the request. Please try sending "
            "your message in a few minutes time.",
    "1360": "TTL was activated, or message expired before delivered.",
}  # fmt: skip
FINALS = ("delivered", "rejected", "undeliverable", None)  # None: no receipt after `submitted` (some networks)
DEFAULT_FINAL_ERROR = {"rejected": "1330", "undeliverable": "1331"}


@dataclass
class Application:
    """The Vonage application and account the stand-in knows."""

    application_id: str
    public_key: rsa.RSAPublicKey
    private_key_file: str
    api_key: str
    api_secret: str
    signature_secret: str
    number: str


@dataclass
class Script:
    """How one recipient's sends are answered and what their status webhook reports."""

    error: str | None = None  # a name of SEND_ERRORS; None: accepted
    times: int | None = None  # None: every send; else this many, then normal answers
    delay: float = 0.0  # seconds before the answer
    retry_after: int | None = None  # a 429's Retry-After (seconds); None: 1
    final: str | None = "delivered"
    final_error: str | None = None  # a code of DELIVERY_ERRORS for rejected/undeliverable


@dataclass
class Received:
    """One accepted message."""

    message_uuid: str
    to: str
    from_: str
    text: str
    client_ref: str | None
    auth: str  # "jwt" or "basic"
    body: dict
    headers: dict
    claims: dict | None  # the verified JWT's claims (None for basic auth)


@dataclass
class Webhook:
    """One webhook POSTed to the app, and what it answered (status 0: no answer)."""

    url: str
    payload: dict
    body: bytes
    headers: dict
    status: int = 0
    answer: bytes = b""


@dataclass
class VonageState:
    """The stand-in's application, scripts and what it received (read by tests, under lock)."""

    app: Application
    origin: str = ""
    status_url: str | None = None
    status_delay: float = 0.0  # seconds between `submitted` and the final status
    scripts: dict[str, Script] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    answered: list[tuple[str, int]] = field(default_factory=list)  # (to, status) of every send
    webhooks: list[Webhook] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    lock: threading.Lock = field(default_factory=threading.Lock)
    # A long-running stand-in (main()) keeps no lists: on_send hears of each send instead.
    record: bool = True
    on_send: Callable[[str, int, str], None] | None = None  # (to, status, text or error title)


COUNTERS = ("accepted", "refused", "invalid", "unauthorized", "webhooks", "webhooks_failed")


class VonageServer:
    """The stand-in: `with VonageServer() as vonage:` serves until the block ends."""

    # port 0: a free one. directory: where its CA, certificate, key and secrets are kept and reused (a
    # long-running stand-in's, whose settings must stay valid across restarts); None: a temporary one.
    def __init__(self, port: int = 0, directory: Path | str | None = None, host: str = "127.0.0.1",
                 status_url: str | None = None, number: str = "447700900000") -> None:  # fmt: skip
        self._own_dir = directory is None
        self._dir = Path(tempfile.mkdtemp(prefix="hato-vonage-")) if directory is None else Path(directory)
        self._dir.mkdir(parents=True, exist_ok=True)
        self.ca_path = str(self._dir / "ca.pem")
        self.state = VonageState(_application(self._dir, number), status_url=status_url)
        self.httpd = _DualServer((host, port), _handler(self.state), _tls_context(self._dir, host, self.ca_path))
        self.state.origin = f"http://{host}:{self.httpd.server_address[1]}"
        self._webhooks = _WebhookSender(self.state)
        # A short poll: shutdown() waits for one, at the end of every test.
        serve = functools.partial(self.httpd.serve_forever, poll_interval=0.05)
        self._thread = threading.Thread(target=serve, name="vonage-stand-in", daemon=True)
        self.httpd.on_accept = self._webhooks.message_accepted

    # -- running

    def __enter__(self) -> VonageServer:
        self._webhooks.start()
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._webhooks.stop()
        if self._own_dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    @property
    def origin(self) -> str:
        return self.state.origin

    @property
    def api_host(self) -> str:
        """What the SDK's HttpClientOptions(api_host=...) takes: host:port (it adds https:// itself)."""
        return self.origin.removeprefix("http://")

    @property
    def application(self) -> Application:
        return self.state.app

    @property
    def status_url(self) -> str | None:
        return self.state.status_url

    @status_url.setter
    def status_url(self, url: str | None) -> None:
        """The application's status webhook URL (None: no status webhooks, unless a message names its own)."""
        with self.state.lock:
            self.state.status_url = url

    def settings(self, **overrides) -> dict:
        """The VONAGE_* settings that send here as this stand-in's application and account."""
        app = self.state.app
        return {
            "VONAGE_APPLICATION_ID": app.application_id,
            "VONAGE_PRIVATE_KEY_FILE": app.private_key_file,
            "VONAGE_API_KEY": app.api_key,
            "VONAGE_API_SECRET": app.api_secret,
            "VONAGE_SIGNATURE_SECRET": app.signature_secret,
            "VONAGE_FROM": app.number,
            "VONAGE_API_BASE": self.origin,
            "VONAGE_CA_FILE": self.ca_path,  # for https://{api_host}, the way the SDK talks
            **overrides,
        }

    # -- scripting

    def script(self, to: str, error: str | None = None, *, times: int | None = None, delay: float = 0.0,
               final: str | None = "delivered", final_error: str | None = None,
               retry_after: int | None = None) -> None:  # fmt: skip
        """Answer sends to `to` with SEND_ERRORS[error] (None: accept) after delay s, `times` times (None: always).

        final: the status webhook's last status for an accepted send: delivered, rejected, undeliverable, or None
        (only `submitted`); final_error: the code of DELIVERY_ERRORS its error object carries.
        """
        if error is not None and error not in SEND_ERRORS:
            raise KeyError(f"unknown Vonage send error {error!r}; known: {', '.join(SEND_ERRORS)}")
        if final not in FINALS:
            raise ValueError(f"final must be one of {FINALS} (Vonage's statuses), not {final!r}")
        if final_error is not None and (final not in DEFAULT_FINAL_ERROR or final_error not in DELIVERY_ERRORS):
            raise ValueError(f"final_error {final_error!r}: a code of DELIVERY_ERRORS, with rejected/undeliverable")
        with self.state.lock:
            self.state.scripts[to] = Script(error, times, delay, retry_after, final, final_error)

    # -- webhooks to the app

    def inbound(self, url: str, from_: str, text: str, to: str | None = None) -> tuple[int, bytes]:
        """POST an inbound SMS to url as the Messages API does, signed; the app's (status, body)."""
        words = text.split()
        payload = {
            "channel": "sms",
            "message_uuid": str(uuid.uuid4()),
            "message_type": "text",
            "to": to or self.state.app.number,
            "from": from_,
            "timestamp": _timestamp(),
            "text": text,
            "sms": {"num_messages": str(_segments(text)), **({"keyword": words[0].upper()} if words else {})},
            "usage": {"currency": "EUR", "price": "0.0057"},
        }
        hook = self._webhooks.post(url, payload, application_id=self.state.app.application_id)
        return hook.status, hook.answer

    def wait_webhooks(self, count: int, seconds: float = 10.0) -> list[Webhook]:
        """The webhooks sent so far once there are at least count (AssertionError after seconds)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            hooks = self.webhooks
            if len(hooks) >= count:
                return hooks
            time.sleep(0.02)
        raise AssertionError(f"{len(self.webhooks)} Vonage webhooks after {seconds}s, wanted {count}")

    # -- reading

    @property
    def received(self) -> list[Received]:
        with self.state.lock:
            return list(self.state.received)

    @property
    def rejected(self) -> list[str]:
        with self.state.lock:
            return list(self.state.rejected)

    @property
    def webhooks(self) -> list[Webhook]:
        with self.state.lock:
            return list(self.state.webhooks)

    def received_by(self, to: str) -> list[Received]:
        """The accepted messages to one number."""
        return [r for r in self.received if r.to == to]

    def counts(self) -> dict[str, int]:
        """How many sends were accepted, refused by a script, invalid or unauthorized; webhooks sent and failed."""
        with self.state.lock:
            return dict(self.state.counters)

    def reset(self) -> None:
        """Forget scripts, what was received and the counts (a benchmark's rounds start clean)."""
        with self.state.lock:
            self.state.scripts.clear()
            self.state.received.clear()
            self.state.rejected.clear()
            self.state.answered.clear()
            self.state.webhooks.clear()
            self.state.counters = dict.fromkeys(COUNTERS, 0)


# -- the application's keys and secrets


def _application(directory: Path, number: str) -> Application:
    """The application kept in directory (application.json, private.key), made on first use."""
    info_file, key_file = directory / "application.json", directory / "private.key"
    if info_file.exists() and key_file.exists():
        info = json.loads(info_file.read_text())
        key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError(f"{key_file}: not an RSA key")
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        # The dashboard's shapes: a UUID application id, an 8-hex api key, a 16-character secret; the signature
        # secret is longer (HS256 keys should be at least 32 bytes).
        info = {
            "application_id": str(uuid.uuid4()),
            "api_key": secrets.token_hex(4),
            "api_secret": secrets.token_urlsafe(12)[:16],
            "signature_secret": secrets.token_urlsafe(32),
            "number": number,
        }
        # PKCS#8 PEM, as the dashboard's private.key: vonage_jwt takes it as a path (it ends in an extension).
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        key_file.write_bytes(pem)
        key_file.chmod(0o600)
        info_file.write_text(json.dumps(info, indent=2) + "\n")
        info_file.chmod(0o600)
    return Application(info["application_id"], key.public_key(), str(key_file), info["api_key"], info["api_secret"],
                       info["signature_secret"], info["number"])  # fmt: skip


def _tls_context(directory: Path, host: str, ca_path: str) -> ssl.SSLContext:
    """The server side of TLS, with a certificate from a trustme CA kept in directory."""
    cert_file, cert_key = directory / "cert.pem", directory / "cert.key"
    if not all(path.exists() for path in (Path(ca_path), cert_file, cert_key)):
        ca = trustme.CA()
        cert = ca.issue_cert(*dict.fromkeys(("127.0.0.1", "localhost", host)))
        ca.cert_pem.write_to_path(ca_path)
        cert.private_key_pem.write_to_path(str(cert_key))
        for i, pem in enumerate(cert.cert_chain_pems):
            pem.write_to_path(str(cert_file), append=i > 0)
        cert_key.chmod(0o600)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert_file), str(cert_key))
    return context


def _timestamp() -> str:
    """Now in ISO 8601 UTC, as the webhooks carry it (2025-02-03T12:14:25.123Z)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


GSM7 = set(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿"
    "abcdefghijklmnopqrstuvwxyzäöñüà"
)
GSM7_EXTENSION = set("^{}\\[~]|€\f")  # two septets each


def _segments(text: str) -> int:
    """How many SMS a text takes: GSM-7 (160, or 153 per part) or else UCS-2 (70, or 67 per part)."""
    if all(c in GSM7 or c in GSM7_EXTENSION for c in text):
        septets = len(text) + sum(c in GSM7_EXTENSION for c in text)
        return 1 if septets <= 160 else math.ceil(septets / 153)
    units = len(text.encode("utf-16-le")) // 2
    return 1 if units <= 70 else math.ceil(units / 67)


# -- the HTTP side


class _DualServer(ThreadingHTTPServer):
    """ThreadingHTTPServer whose connections are TLS when they open with a TLS record, plain HTTP otherwise."""

    daemon_threads = True
    on_accept: Callable[[Received, str | None, str | None], None] | None = None  # (message, final, final_error)

    def __init__(self, address, handler, context: ssl.SSLContext) -> None:
        self.context = context
        super().__init__(address, handler)

    def finish_request(self, request, client_address) -> None:
        request.settimeout(30)  # a client that connects and says nothing
        try:
            first = request.recv(1, socket.MSG_PEEK)
        except OSError:
            return
        if not first:
            return
        if first == b"\x16":  # a TLS handshake record: the SDK, which only speaks https
            try:
                request = self.context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):  # a client that gave up on the handshake
                return
        try:
            super().finish_request(request, client_address)
        finally:
            request.close()

    def handle_error(self, request, client_address) -> None:  # a client that hung up mid-request: not news
        return


class _Problem(Exception):
    """An RFC 7807 refusal of a send."""

    def __init__(self, error: SendError, counter: str, headers: dict | None = None) -> None:
        super().__init__(error.title)
        self.error, self.counter, self.headers = error, counter, headers or {}


def _problem(error: SendError) -> dict:
    body = {"type": error.type, "title": error.title, "detail": error.detail, "instance": uuid.uuid4().hex}
    if error.invalid_parameters:
        body["invalid_parameters"] = [{"name": n, "reason": r} for n, r in error.invalid_parameters]
    return body


def _invalid(*fields: tuple[str, str]) -> _Problem:
    error = SendError(422, f"{MESSAGES_ERRORS_DOC}#1150", "Invalid params",
                      "The value of one or more parameters is invalid.", fields)  # fmt: skip
    return _Problem(error, "invalid")


def _unauthorized(detail: str) -> _Problem:
    base = SEND_ERRORS["unauthorized"]
    return _Problem(SendError(base.status, base.type, base.title, detail), "unauthorized")


def _authenticate(app: Application, header: str) -> tuple[str, dict | None]:
    """("jwt", claims) or ("basic", None) for a valid Authorization header; _Problem 401 otherwise."""
    scheme, _, credentials = header.partition(" ")
    if not credentials:
        raise _unauthorized("Request header 'Authorization' missing or malformed.")
    if scheme == "Basic":
        try:
            key, _, secret = base64.b64decode(credentials, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise _unauthorized("Malformed Basic credentials.") from None
        if not (secrets.compare_digest(key, app.api_key) and secrets.compare_digest(secret, app.api_secret)):
            raise _unauthorized("You did not provide correct credentials.")
        return "basic", None
    if scheme != "Bearer":
        raise _unauthorized(f"Unsupported authorization scheme {scheme!r}.")
    try:
        claims = jwt.decode(credentials, app.public_key, algorithms=["RS256"],
                            options={"require": ["application_id", "iat", "jti"]})  # fmt: skip
    except jwt.ExpiredSignatureError:
        raise _unauthorized("The JWT provided has expired.") from None
    except jwt.PyJWTError:
        raise _unauthorized("Invalid Token") from None
    if claims["application_id"] != app.application_id:
        raise _unauthorized("The JWT's application_id is not an application of this account.")
    return "jwt", claims


# The 422s of a body Vonage would not send (the API reference's MessageUnprocessableResponse shapes, with the
# codes of its error list); "Invalid params" (_invalid) names the fields in invalid_parameters.
UNPROCESSABLE: dict[str, SendError] = {
    "channel": SendError(422, f"{MESSAGES_ERRORS_DOC}#1400", "Unsupported channel",
                         "The specified channel is not supported."),
    "message_type": SendError(422, f"{MESSAGES_ERRORS_DOC}#1440", "Invalid message type",
                              "The message type specified in the request is not supported for the given channel."),
    "to": SendError(422, f"{MESSAGES_ERRORS_DOC}#1430", "Invalid recipient",
                    "The `to` parameter is invalid for the given channel."),
    "from": SendError(422, f"{MESSAGES_ERRORS_DOC}#1420", "Invalid sender",
                      "The `from` parameter is invalid for the given channel."),
    "client_ref": SendError(422, f"{MESSAGES_ERRORS_DOC}#1450", "Invalid client reference",
                            f"The client reference can be a string of up to {MAX_CLIENT_REF} characters."),
}  # fmt: skip


def _validate(body: bytes) -> dict:
    """The send body if Vonage would take it as an SMS, else the _Problem Vonage answers."""
    try:
        payload = json.loads(body)
    except ValueError as exc:
        error = SendError(422, f"{ERRORS_DOC}#invalid-json", "The request body did not contain valid JSON", str(exc))
        raise _Problem(error, "invalid") from None
    if not isinstance(payload, dict):
        raise _invalid(("body", "must be a JSON object"))
    missing = [(name, "is required.") for name in ("channel", "message_type", "to", "from") if name not in payload]
    if missing:
        raise _invalid(*missing)
    text, client_ref, ttl, url = (payload.get(k) for k in ("text", "client_ref", "ttl", "webhook_url"))
    wrong = [
        ("channel", payload["channel"] != "sms"),  # the stand-in speaks SMS only
        ("message_type", payload["message_type"] != "text"),
        ("to", not isinstance(payload["to"], str) or not E164.match(payload["to"])),
        ("from", not isinstance(payload["from"], str) or not SENDER_ID.match(payload["from"])),
        (
            "client_ref",
            client_ref is not None and (not isinstance(client_ref, str) or len(client_ref) > MAX_CLIENT_REF),
        ),
    ]
    for name, is_wrong in wrong:
        if is_wrong:
            raise _Problem(UNPROCESSABLE[name], "invalid")
    if not isinstance(text, str) or not text or len(text) > MAX_TEXT:
        raise _invalid(("text", f"is required, at most {MAX_TEXT} characters"))
    if ttl is not None and (type(ttl) is not int or not TTL_RANGE[0] <= ttl <= TTL_RANGE[1]):
        raise _invalid(("ttl", f"must be an integer from {TTL_RANGE[0]} to {TTL_RANGE[1]}"))
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise _invalid(("webhook_url", "must be a URL"))
    return payload


def _handler(state: VonageState):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's pooled session expects
        timeout = 30  # an idle kept-alive connection's thread ends after this

        def log_message(self, *args) -> None:  # keep test output quiet
            return

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.split("?")[0] != SEND_PATH:
                return self._json(404, _problem(SendError(404, f"{ERRORS_DOC}#not-found", "Not Found",
                                                          f"No such resource: {self.path}")))  # fmt: skip
            try:
                auth, claims = _authenticate(state.app, self.headers.get("Authorization", ""))
                payload = _validate(body)
                self._send(payload, auth, claims)
            except _Problem as problem:
                self._refuse(problem, body)

        def _send(self, payload: dict, auth: str, claims: dict | None) -> None:
            to = payload["to"]
            with state.lock:
                script = state.scripts.get(to) or Script()
                if script.times is not None:
                    script.times -= 1
                    if script.times <= 0:
                        del state.scripts[to]
            if script.delay:
                time.sleep(script.delay)
            if script.error is not None:
                error = SEND_ERRORS[script.error]
                retry = {"Retry-After": str(script.retry_after or 1)} if error.status == 429 else {}
                raise _Problem(error, "refused", retry)
            received = Received(str(uuid.uuid4()), to, payload["from"], payload["text"], payload.get("client_ref"),
                                auth, payload, {k.lower(): v for k, v in self.headers.items()}, claims)  # fmt: skip
            with state.lock:
                state.counters["accepted"] += 1
                if state.record:
                    state.received.append(received)
                    state.answered.append((to, 202))
            if state.on_send is not None:
                state.on_send(to, 202, payload["text"])
            self._json(202, {"message_uuid": received.message_uuid}, content_type="application/json")
            accepted = self.server.on_accept
            if accepted is not None:
                accepted(received, script.final, script.final_error)

        def _refuse(self, problem: _Problem, body: bytes) -> None:
            to = ""
            try:
                to = str(json.loads(body).get("to", ""))
            except (ValueError, AttributeError):
                pass
            with state.lock:
                state.counters[problem.counter] += 1
                if state.record:
                    state.answered.append((to, problem.error.status))
                    if problem.counter == "invalid":
                        names = ", ".join(name for name, _ in problem.error.invalid_parameters)
                        state.rejected.append(f"{problem.error.title}: {names or problem.error.detail}")
            if state.on_send is not None:
                state.on_send(to, problem.error.status, problem.error.title)
            self._json(problem.error.status, _problem(problem.error), problem.headers)

        def _json(self, status: int, body: dict, headers: dict | None = None,
                  content_type: str = "application/problem+json") -> None:  # fmt: skip
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("X-Request-Id", str(uuid.uuid4()))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


# -- webhooks


def sign_webhook(body: bytes, signature_secret: str, api_key: str, application_id: str | None = None) -> str:
    """The Bearer token of a signed webhook: HS256 with the signature secret, payload_hash = SHA-256 hex of body."""
    claims = {
        "iat": int(time.time()),
        "jti": str(uuid.uuid4()),
        "iss": "Vonage",
        "payload_hash": hashlib.sha256(body).hexdigest(),
        "api_key": api_key,
    }
    if application_id is not None:
        claims["application_id"] = application_id
    return jwt.encode(claims, signature_secret, algorithm="HS256", headers={"typ": "JWT"})


class _WebhookSender:
    """One thread that POSTs the status webhooks in order (submitted before the final status), as Vonage would."""

    def __init__(self, state: VonageState) -> None:
        self.state = state
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="vonage-webhooks", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def message_accepted(self, received: Received, final: str | None, final_error: str | None) -> None:
        """Queue the status webhooks of an accepted message (none when neither it nor the application has a URL)."""
        url = received.body.get("webhook_url") or self.state.status_url
        if url is None:
            return
        application_id = received.claims["application_id"] if received.claims else None
        segments = _segments(received.text)
        base = {
            "message_uuid": received.message_uuid,
            "to": received.to,
            "from": received.from_,
            "channel": "sms",
            **({"client_ref": received.client_ref} if received.client_ref is not None else {}),
        }
        usage = {"usage": {"currency": "EUR", "price": f"{float(PRICE_PER_SEGMENT) * segments:.4f}"}}
        self._queue.put((url, {**base, "status": "submitted", **usage, "sms": {"count_total": str(segments)}},
                         application_id, 0.0))  # fmt: skip
        if final is None:
            return
        final_body = {**base, "status": final}
        if final == "delivered":
            final_body.update(usage)
        else:
            code = final_error or DEFAULT_FINAL_ERROR[final]
            final_body["error"] = {"type": f"{MESSAGES_ERRORS_DOC}#{code}", "title": code,
                                   "detail": DELIVERY_ERRORS[code], "instance": uuid.uuid4().hex}  # fmt: skip
        self._queue.put((url, final_body, application_id, self.state.status_delay))

    def post(self, url: str, payload: dict, application_id: str | None) -> Webhook:
        """POST one signed webhook now and record it with the app's answer."""
        app = self.state.app
        body = json.dumps(payload).encode()
        token = sign_webhook(body, app.signature_secret, app.api_key, application_id)
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}",
                   "User-Agent": "Vonage-Messages-Stand-In/1.0"}  # fmt: skip
        hook = Webhook(url, payload, body, headers)
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (a test's own URL)
                hook.status, hook.answer = response.status, response.read()
        except urllib.error.HTTPError as exc:
            hook.status, hook.answer = exc.code, exc.read()
        except (OSError, ValueError) as exc:
            hook.answer = repr(exc).encode()
        with self.state.lock:
            self.state.counters["webhooks"] += 1
            if not 200 <= hook.status < 300:
                self.state.counters["webhooks_failed"] += 1
            if self.state.record:
                self.state.webhooks.append(hook)
        return hook

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            url, payload, application_id, delay = item
            if delay:
                time.sleep(delay)
            payload["timestamp"] = _timestamp()
            self.post(url, payload, application_id)


@pytest.fixture
def vonage_server():
    """A local Vonage Messages API (SMS) with signed webhooks; see the module docstring."""
    with VonageServer() as server:
        yield server


# Running on its own (`make run`, benchmarks).


def main(argv: list[str] | None = None) -> int:
    """Serve a stand-in until SIGTERM or Ctrl-C, its keys and secrets kept in --dir with settings.json."""
    found = standalone.parser("tests.support.vonage_server", "A local Vonage Messages API for development: SMS "
                              "sends, signed status and inbound webhooks.",
                              "the CA, the certificate, the application key")  # fmt: skip
    found.add_argument("--status-url", default=None, help="the application's status webhook URL")
    found.add_argument("--number", default="447700900000", help="the account's number (VONAGE_FROM) of a new dir")
    args = found.parse_args(argv)
    where = standalone.directory(args)

    def tell(to: str, status: int, what: str) -> None:
        # The number's last 4 digits only: it is a person's phone.
        print(f"{status} {'sms' if status == 202 else 'refused'} to …{to[-4:]}: {what!r}", flush=True)

    with VonageServer(args.port, where, args.host, status_url=args.status_url, number=args.number) as server:
        server.state.record = False
        server.state.on_send = None if args.quiet else tell
        standalone.serve(where, server.settings(), f"Vonage stand-in on {server.origin} (application "
                         f"{server.application.application_id})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
