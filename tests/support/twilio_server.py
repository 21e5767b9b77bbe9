"""A local Twilio for tests: Programmable Messaging's Messages API, status callbacks and inbound webhooks.

TwilioServer runs a threaded HTTP server (HTTP/1.1 with keep-alive) on 127.0.0.1 with one account (an AC sid,
an auth token, a phone number and an MG messaging service); `settings()` gives the TWILIO_* settings that reach
it. Everything on the wire is Twilio's own shape (twilio.com/docs/messaging/api/message-resource and the error
dictionary twilio.com/docs/api/errors), checked by driving it with the real `twilio` SDK
(tests/providers/test_twilio_standin.py):

POST /2010-04-01/Accounts/<AccountSid>/Messages.json, form-encoded, HTTP Basic auth AccountSid:AuthToken
(401 code 20003 otherwise). To (E.164), From (the account's number) or MessagingServiceSid, Body (at most
1600 characters), optional StatusCallback. A refusal is Twilio's error body {"code", "message", "more_info",
"status"} (21604, 21211, 21603, 21212, 21659, 21705, 21602, 21617, 21609) and is listed in `rejected`. An
accepted send is answered 201 with the Message resource ("queued"; "accepted" through the messaging service)
and listed in `received`. `script(to, error, …)` makes one recipient's sends answer with one of ERRORS
(21211, 21610, 21408, 21606, 20429 with Retry-After, 20500, 20503), some times, after a delay, and chooses
how its messages end in the status callbacks (delivered, or undelivered / failed with a 300xx ErrorCode).

Status callbacks: a message with a StatusCallback gets form-encoded POSTs there in Twilio's order (queued when
sent through the messaging service, sent, then delivered / undelivered; a failed message only "failed"),
`callback_delay` seconds apart, each signed with X-Twilio-Signature as the SDK's RequestValidator computes it.
`callbacks` lists them with the status the app answered; `wait_callbacks()` waits until none is pending.
`inbound(url, from_, body)` posts an incoming-message webhook, signed the same way, and returns the answer.

Run on its own (`make run`, benchmarks), it serves until SIGTERM or Ctrl-C, keeping its credentials in a
directory across restarts and writing the TWILIO_* settings that reach it there:

    python -m tests.support.twilio_server --port 2199 --dir var/twilio      # then read var/twilio/settings.json
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import heapq
import hmac
import itertools
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from twilio.request_validator import RequestValidator

from tests.support import standalone

API_VERSION = "2010-04-01"
MESSAGES_PATH = re.compile(r"^/2010-04-01/Accounts/([^/]+)/Messages\.json$")
E164 = re.compile(r"^\+[1-9]\d{6,14}$")
ALPHANUMERIC_SENDER = re.compile(r"^(?=.*[A-Za-z])[A-Za-z0-9 ]{1,11}$")
MESSAGING_SERVICE_SID = re.compile(r"^MG[0-9a-f]{32}$")
MAX_BODY = 1600
FORM = "application/x-www-form-urlencoded"
# Twilio's webhooks come from its proxy, with this agent (twilio.com/docs/usage/webhooks/webhooks-faq).
WEBHOOK_USER_AGENT = "TwilioProxy/1.1"
MORE_INFO = "https://www.twilio.com/docs/errors/{code}"

# Twilio's REST API errors by code: (HTTP status, message). The messages are the ones Twilio answers; {to},
# {from}, {url} and {path} are filled in from the request.
ERRORS: dict[int, tuple[int, str]] = {
    20003: (401, "Authenticate"),
    20004: (405, "Method not allowed"),
    20404: (404, "The requested resource {path} was not found"),
    20429: (429, "Too Many Requests"),
    20500: (500, "An internal server error has occurred"),
    20503: (503, "Service is unavailable. Please try again"),
    21211: (400, "The 'To' number {to} is not a valid phone number."),
    21212: (400, "The 'From' number {from} is not a valid phone number, shortcode, or alphanumeric sender ID."),
    21408: (400, "Permission to send an SMS has not been enabled for the region indicated by the 'To' number: {to}."),
    21602: (400, "Message body is required."),
    21603: (400, "A 'From' or 'MessagingServiceSid' parameter is required to send a message."),
    21604: (400, "A 'To' phone number is required."),
    21606: (400, "The 'From' phone number provided is not a valid message-capable Twilio phone number for this "
                 "destination/account."),
    21609: (400, "The StatusCallback URL {url} is not a valid URL."),
    21610: (400, "Attempt to send to unsubscribed recipient"),
    21617: (400, "The concatenated message body exceeds the 1600 character limit."),
    21659: (400, "'From' {from} is not a Twilio phone number or Short Code country mismatch"),
    21705: (400, "The Messaging Service is invalid"),
}  # fmt: skip
AUTH_DETAIL = "Your AccountSid or AuthToken was incorrect."
# What a status callback's ErrorCode says when a message ends undelivered or failed (carrier errors).
DELIVERY_ERRORS: dict[int, str] = {
    30003: "Unreachable destination handset",
    30005: "Unknown destination handset",
    30006: "Landline or unreachable carrier",
    30007: "Message filtered",
    30008: "Unknown error",
}
FINAL_STATUSES = ("delivered", "undelivered", "failed")
DEFAULT_FINAL_ERROR = {"undelivered": 30003, "failed": 30008}

# GSM 03.38: a body of these characters is sent in 7-bit segments (160, or 153 when concatenated; the
# extension characters take two), any other body in UCS-2 segments (70, or 67).
GSM7_BASIC = set(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿"
    "abcdefghijklmnopqrstuvwxyzäöñüà"
)
GSM7_EXTENSION = set("^{}\\[~]|€\f")


def num_segments(body: str) -> int:
    """How many SMS segments Twilio bills for body."""
    if all(c in GSM7_BASIC or c in GSM7_EXTENSION for c in body):
        units, single, part = sum(2 if c in GSM7_EXTENSION else 1 for c in body), 160, 153
    else:
        units, single, part = len(body.encode("utf-16-le")) // 2, 70, 67
    return 1 if units <= single else math.ceil(units / part)


def new_sid(prefix: str) -> str:
    """A Twilio SID: two letters and 32 hex digits."""
    return prefix + os.urandom(16).hex()


def rfc2822_now() -> str:
    """Now as Twilio writes dates: 'Thu, 24 Aug 2023 05:01:45 +0000'."""
    return format_datetime(datetime.now(UTC))


def twilio_error(code: int, status: int | None = None, **fields: str) -> tuple[int, dict]:
    """Twilio's error answer for code: (HTTP status, body); status overrides the code's usual one."""
    usual, text = ERRORS[code]
    body = {"code": code, "message": text.format_map(_Blank(fields)), "more_info": MORE_INFO.format(code=code),
            "status": status or usual}  # fmt: skip
    if code == 20003:
        body["detail"] = AUTH_DETAIL
    return status or usual, body


class _Blank(dict):
    """Format fields: one the request did not give is empty."""

    def __missing__(self, key: str) -> str:
        return ""


@dataclass
class Script:
    """How one recipient's sends are answered and how its accepted messages end."""

    error: int | None = None  # a code of ERRORS (None: accepted)
    http_status: int | None = None  # overrides the error's HTTP status
    retry_after: str | None = None
    delay: float = 0.0
    times: int | None = None  # None: every send gets the error and delay; else this many, then normal answers
    final: str = "delivered"
    final_error: int | None = None


@dataclass
class Received:
    """One accepted send."""

    sid: str
    to: str
    from_: str | None
    messaging_service_sid: str | None
    body: str
    status_callback: str | None
    params: dict[str, str]
    headers: dict[str, str]
    resource: dict


@dataclass
class Refusal:
    """One send answered with an error."""

    to: str
    code: int
    status: int
    message: str


@dataclass
class Posted:
    """One status callback or inbound webhook posted to the app, and how the app answered."""

    url: str
    params: dict[str, str]
    signature: str
    status: int | None  # the app's HTTP status; None: no answer (refused connection, timeout)
    text: str = ""
    error: str = ""


@dataclass
class TwilioState:
    """The stand-in's account, scripts and what it received and posted (read by tests, under lock)."""

    account_sid: str
    auth_token: str
    from_number: str
    messaging_service_sid: str
    origin: str = ""
    callback_delay: float = 0.1
    scripts: dict[str, Script] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    rejected: list[Refusal] = field(default_factory=list)
    callbacks: list[Posted] = field(default_factory=list)
    inbounds: list[Posted] = field(default_factory=list)
    accepted: int = 0
    refused: int = 0
    recipients: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # A long-running stand-in (main()) keeps no lists of what it received: on_send hears of each send instead.
    record: bool = True
    on_send: Callable[[str, int, str], None] | None = None  # (to, HTTP status, the body or the error's message)


class TwilioServer:
    """The stand-in: `with TwilioServer() as twilio:` serves until the block ends."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", *, account_sid: str | None = None,
                 auth_token: str | None = None, from_number: str = "+15005550006",
                 messaging_service_sid: str | None = None, callback_delay: float = 0.1,
                 callback_threads: int = 4) -> None:  # fmt: skip
        self.state = TwilioState(
            account_sid=account_sid or new_sid("AC"),
            auth_token=auth_token or os.urandom(16).hex(),
            from_number=from_number,
            messaging_service_sid=messaging_service_sid or new_sid("MG"),
            callback_delay=callback_delay,
        )
        self.validator = RequestValidator(self.state.auth_token)
        self._poster = _Poster(self.state, self.validator, callback_threads)
        self.httpd = _Server((host, port), _handler(self.state, self._poster))
        self.state.origin = f"http://{host}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="twilio-stand-in", daemon=True)  # fmt: skip

    # -- running

    def __enter__(self) -> TwilioServer:
        self._thread.start()
        self._poster.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._poster.close()

    @property
    def origin(self) -> str:
        return self.state.origin

    @property
    def account_sid(self) -> str:
        return self.state.account_sid

    @property
    def auth_token(self) -> str:
        return self.state.auth_token

    @property
    def from_number(self) -> str:
        return self.state.from_number

    @property
    def messaging_service_sid(self) -> str:
        return self.state.messaging_service_sid

    @property
    def callback_delay(self) -> float:
        return self.state.callback_delay

    @callback_delay.setter
    def callback_delay(self, seconds: float) -> None:
        self.state.callback_delay = seconds

    def settings(self, **overrides) -> dict:
        """The TWILIO_* settings that send here."""
        return {
            "TWILIO_ACCOUNT_SID": self.account_sid,
            "TWILIO_AUTH_TOKEN": self.auth_token,
            "TWILIO_FROM": self.from_number,
            "TWILIO_API_BASE": self.origin,
            **overrides,
        }

    # -- scripting

    def script(self, to: str, error: int | None = None, *, http_status: int | None = None,
               retry_after: str | int | None = None, times: int | None = None, delay: float = 0.0,
               final: str = "delivered", final_error: int | None = None) -> None:  # fmt: skip
        """Answer sends to `to` with ERRORS[error] (None: accept), after delay s, `times` times (None: always).

        http_status alone picks the matching error (429: 20429, 500: 20500, 503: 20503); a 20429 carries
        Retry-After (retry_after, default 1). final / final_error: how that number's accepted messages end in
        the status callbacks (delivered; undelivered or failed with one of DELIVERY_ERRORS).
        """
        if error is None and http_status is not None:
            error = {429: 20429, 500: 20500, 503: 20503}.get(http_status, 20500)
        if error is not None and error not in ERRORS:
            raise KeyError(f"unknown Twilio error {error!r}; known: {', '.join(map(str, ERRORS))}")
        if final not in FINAL_STATUSES:
            raise ValueError(f"final must be one of {FINAL_STATUSES}, not {final!r}")
        if final == "delivered":
            final_error = None
        else:
            final_error = final_error or DEFAULT_FINAL_ERROR[final]
            if final_error not in DELIVERY_ERRORS:
                raise KeyError(f"unknown delivery error {final_error}; known: {', '.join(map(str, DELIVERY_ERRORS))}")
        if error == 20429 and retry_after is None:
            retry_after = 1
        with self.state.lock:
            self.state.scripts[to] = Script(error, http_status, None if retry_after is None else str(retry_after),
                                            delay, times, final, final_error)  # fmt: skip

    def clear_scripts(self) -> None:
        """Answer every recipient normally again."""
        with self.state.lock:
            self.state.scripts.clear()

    # -- reading

    @property
    def received(self) -> list[Received]:
        with self.state.lock:
            return list(self.state.received)

    @property
    def rejected(self) -> list[Refusal]:
        with self.state.lock:
            return list(self.state.rejected)

    @property
    def callbacks(self) -> list[Posted]:
        with self.state.lock:
            return list(self.state.callbacks)

    @property
    def inbounds(self) -> list[Posted]:
        with self.state.lock:
            return list(self.state.inbounds)

    def received_by(self, to: str) -> list[Received]:
        """The accepted sends to one number."""
        return [r for r in self.received if r.to == to]

    def callbacks_for(self, sid: str) -> list[Posted]:
        """The status callbacks posted for one message, in order."""
        return [c for c in self.callbacks if c.params.get("MessageSid") == sid]

    def counts(self) -> dict[str, int]:
        """For a benchmark: sends accepted, distinct recipients accepted, sends refused, callbacks posted."""
        with self.state.lock:
            return {"accepted": self.state.accepted, "recipients": len(self.state.recipients),
                    "refused": self.state.refused, "callbacks": self._poster.posted}  # fmt: skip

    def reset(self) -> None:
        """Forget what was received, refused and posted, and the counters (scripts and credentials stay)."""
        with self.state.lock:
            self.state.received.clear()
            self.state.rejected.clear()
            self.state.callbacks.clear()
            self.state.inbounds.clear()
            self.state.recipients.clear()
            self.state.accepted = self.state.refused = self._poster.posted = 0

    def wait_callbacks(self, timeout: float = 10.0) -> None:
        """Wait until the status callbacks of every message sent so far are posted (AssertionError after timeout s)."""
        if not self._poster.wait(timeout):
            raise AssertionError(f"status callbacks still pending after {timeout}s")

    # -- inbound messages

    def inbound(self, url: str, from_: str, body: str, to: str | None = None, *,
                messaging_service_sid: str | None = None, timeout: float = 10.0) -> tuple[int, str]:  # fmt: skip
        """POST an incoming SMS webhook to url as Twilio would, signed; the app's (HTTP status, response text)."""
        sid = new_sid("SM")
        params = {
            "ToCountry": "",
            "ToState": "",
            "SmsMessageSid": sid,
            "NumMedia": "0",
            "ToCity": "",
            "FromZip": "",
            "SmsSid": sid,
            "FromState": "",
            "SmsStatus": "received",
            "FromCity": "",
            "Body": body,
            "FromCountry": "",
            "To": to or self.from_number,
            "ToZip": "",
            "NumSegments": str(num_segments(body)),
            "MessageSid": sid,
            "AccountSid": self.account_sid,
            "From": from_,
            "ApiVersion": API_VERSION,
        }
        if messaging_service_sid:
            params["MessagingServiceSid"] = messaging_service_sid
        with requests.Session() as session:
            posted = self._poster.post(session, url, params, timeout)
        with self.state.lock:
            self.state.inbounds.append(posted)
        if posted.status is None:
            raise ConnectionError(f"inbound webhook to {url}: {posted.error}")
        return posted.status, posted.text


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer with a deep accept queue: a benchmark opens many connections at once."""

    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address) -> None:  # a client that hung up mid-request: not news
        return


def _handler(state: TwilioState, poster: _Poster):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as Twilio's API
        timeout = 30  # an idle kept-alive connection's thread ends after this
        # Head and body leave in one segment (flushed after each request), with no Nagle delay: written
        # apart, a kept-alive client's delayed ACK stalls every answer by ~40 ms.
        wbufsize = 64 * 1024
        disable_nagle_algorithm = True

        def log_message(self, *args) -> None:  # keep test output quiet
            return

        def do_GET(self) -> None:  # noqa: N802
            self._refuse(self._not_allowed_or_missing())

        do_PUT = do_DELETE = do_PATCH = do_GET

        def do_POST(self) -> None:  # noqa: N802
            expected = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(expected)
            if len(raw) < expected:  # the client went away mid-body (a killed worker): a server drops that request
                self.close_connection = True
                return
            match = MESSAGES_PATH.match(self.path)
            if match is None:
                return self._refuse(twilio_error(20404, path=self.path.split("?")[0]))
            if not self._authenticated(match.group(1)):
                return self._refuse(twilio_error(20003), {"WWW-Authenticate": 'Basic realm="Twilio API"'})
            # Twilio reads only a form body: anything else looks like a request without To (its 21604 page says so).
            form = self.headers.get("Content-Type", "").split(";")[0].strip().lower() == FORM
            params = {k: v[0] for k, v in parse_qs(raw.decode("utf-8", "replace")).items()} if form else {}
            to = params.get("To", "")
            refusal = _invalid(state, params)
            if refusal is not None:
                return self._refuse(refusal, to=to)
            with state.lock:
                script = state.scripts.get(to)
                scripted = script is not None and (script.error is not None or script.delay > 0)
                if scripted and script.times is not None:
                    script.times -= 1
                    if script.times <= 0:  # later sends are answered normally; the message's ending stays
                        state.scripts[to] = dataclasses.replace(script, error=None, delay=0.0, times=None)
            if scripted and script.delay:
                time.sleep(script.delay)
            if scripted and script.error is not None:
                headers = {"Retry-After": script.retry_after} if script.retry_after is not None else {}
                fields = {"to": to, "from": params.get("From", "")}
                return self._refuse(twilio_error(script.error, script.http_status, **fields), headers, to)
            self._accept(params, script)

        # -- answers

        def _accept(self, params: dict[str, str], script: Script | None) -> None:
            sid, now, to, body = new_sid("SM"), rfc2822_now(), params["To"], params["Body"]
            service = params.get("MessagingServiceSid")
            from_ = params.get("From")
            uri = f"/{API_VERSION}/Accounts/{state.account_sid}/Messages/{sid}"
            resource = {
                "account_sid": state.account_sid,
                "api_version": API_VERSION,
                "body": body,
                "date_created": now,
                "date_sent": None,
                "date_updated": now,
                "direction": "outbound-api",
                "error_code": None,
                "error_message": None,
                # Through a messaging service Twilio picks the sender later: no From and no segments yet.
                "from": from_,
                "messaging_service_sid": service,
                "num_media": "0",
                "num_segments": "0" if service and not from_ else str(num_segments(body)),
                "price": None,
                "price_unit": "USD",
                "sid": sid,
                "status": "accepted" if service else "queued",
                "subresource_uris": {"media": f"{uri}/Media.json", "feedback": f"{uri}/Feedback.json"},
                "to": to,
                "uri": f"{uri}.json",
            }
            with state.lock:
                state.accepted += 1
                state.recipients.add(to)
                if state.record:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    state.received.append(Received(sid, to, from_, service, body, params.get("StatusCallback"),
                                                   params, headers, resource))  # fmt: skip
            # Pending before the answer leaves, so that wait_callbacks() right after a send waits for them.
            if params.get("StatusCallback"):
                final = script.final if script is not None else "delivered"
                final_error = script.final_error if script is not None else None
                poster.add(params["StatusCallback"], _status_sequence(state, resource, final, final_error))
            self._json(201, resource)
            if state.on_send is not None:
                state.on_send(to, 201, body)

        def _refuse(self, answer: tuple[int, dict], headers: dict | None = None, to: str = "") -> None:
            status, body = answer
            with state.lock:
                state.refused += 1
                if state.record:
                    state.rejected.append(Refusal(to, body["code"], status, body["message"]))
            if state.on_send is not None:
                state.on_send(to, status, body["message"])
            self._json(status, body, headers)

        def _not_allowed_or_missing(self) -> tuple[int, dict]:
            if MESSAGES_PATH.match(self.path):
                return twilio_error(20004)
            return twilio_error(20404, path=self.path.split("?")[0])

        def _authenticated(self, path_account: str) -> bool:
            scheme, _, encoded = self.headers.get("Authorization", "").partition(" ")
            try:
                user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return False
            return (
                scheme.lower() == "basic"
                and hmac.compare_digest(user, state.account_sid)
                and hmac.compare_digest(password, state.auth_token)
                and path_account == state.account_sid
            )

        def _json(self, status: int, body: dict, headers: dict | None = None) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Twilio-Request-Id", new_sid("RQ"))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


def _invalid(state: TwilioState, params: dict[str, str]) -> tuple[int, dict] | None:
    """Twilio's checks of a Messages create, in its order: the error answer, or None when it is fine."""
    to, from_, service = params.get("To", ""), params.get("From", ""), params.get("MessagingServiceSid", "")
    body, callback = params.get("Body"), params.get("StatusCallback")
    fields = {"to": to, "from": from_, "url": callback or ""}
    if not to:
        return twilio_error(21604, **fields)
    if not E164.match(to):
        return twilio_error(21211, **fields)
    if not from_ and not service:
        return twilio_error(21603, **fields)
    if service and service != state.messaging_service_sid:
        return twilio_error(21705, **fields)
    if from_ and not (E164.match(from_) or ALPHANUMERIC_SENDER.match(from_)):
        return twilio_error(21212, **fields)
    if from_ and from_ != state.from_number:
        return twilio_error(21659, **fields)
    if not body:
        return twilio_error(21602, **fields)
    if len(body) > MAX_BODY:
        return twilio_error(21617, **fields)
    if callback is not None:
        parts = urlsplit(callback)
        if parts.scheme not in ("http", "https") or not parts.hostname or "_" in parts.hostname:
            return twilio_error(21609, **fields)
    return None


def _status_sequence(state: TwilioState, resource: dict, final: str, final_error: int | None) -> list[dict]:
    """The status callbacks of one accepted message, in Twilio's order, as the form parameters it posts."""
    statuses = ["queued"] if resource["messaging_service_sid"] else []
    statuses += [final] if final == "failed" else ["sent", final]  # a failed message was never sent
    common = {
        "AccountSid": state.account_sid,
        "ApiVersion": API_VERSION,
        # Through a messaging service the sender is the service's number.
        "From": resource["from"] or state.from_number,
        "MessageSid": resource["sid"],
        "SmsSid": resource["sid"],
        "To": resource["to"],
    }
    if resource["messaging_service_sid"]:
        common["MessagingServiceSid"] = resource["messaging_service_sid"]
    sequence = []
    for status in statuses:
        params = {**common, "MessageStatus": status, "SmsStatus": status}
        if status in ("undelivered", "failed"):
            params["ErrorCode"] = str(final_error)
        if status in ("delivered", "undelivered"):  # the carrier's delivery receipt's done date, YYMMDDhhmm
            params["RawDlrDoneDate"] = datetime.now(UTC).strftime("%y%m%d%H%M")
        sequence.append(params)
    return sequence


class _Poster:
    """Posts status callbacks in the background: each message's in order, callback_delay apart, many at once."""

    def __init__(self, state: TwilioState, validator: RequestValidator, threads: int) -> None:
        self._state = state
        self._validator = validator
        self._due: list[tuple[float, int, str, list[dict]]] = []  # (when, tie-break, url, callbacks left)
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._pending = 0  # messages whose callbacks are not all posted
        self._closed = False
        self._local = threading.local()
        self._threads = [threading.Thread(target=self._run, name=f"twilio-callbacks-{i}", daemon=True)
                         for i in range(threads)]  # fmt: skip
        self.posted = 0

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=5)

    def add(self, url: str, sequence: list[dict]) -> None:
        """Post sequence to url, one after the other, the first callback_delay from now."""
        with self._cond:
            self._pending += 1
            heapq.heappush(self._due, (time.monotonic() + self._state.callback_delay, next(self._order), url, sequence))
            self._cond.notify()

    def wait(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._pending == 0, timeout)

    def _run(self) -> None:
        with requests.Session() as session:  # kept alive across callbacks, as Twilio's proxies do
            self._serve(session)

    def _serve(self, session: requests.Session) -> None:
        while True:
            with self._cond:
                while not self._closed and (not self._due or self._due[0][0] > time.monotonic()):
                    self._cond.wait(self._due[0][0] - time.monotonic() if self._due else None)
                if self._closed:
                    return
                _, _, url, sequence = heapq.heappop(self._due)
            posted = self.post(session, url, sequence[0], timeout=10.0)
            with self._cond:
                with self._state.lock:
                    self.posted += 1
                    if self._state.record:
                        self._state.callbacks.append(posted)
                if len(sequence) > 1:  # the next status only once this one was answered, as Twilio's order
                    due = time.monotonic() + self._state.callback_delay
                    heapq.heappush(self._due, (due, next(self._order), url, sequence[1:]))
                else:
                    self._pending -= 1
                self._cond.notify_all()

    def post(self, session: requests.Session, url: str, params: dict[str, str], timeout: float) -> Posted:
        """POST params to url form-encoded, signed with X-Twilio-Signature; what the app answered."""
        signature = self._validator.compute_signature(url, params)
        headers = {
            "X-Twilio-Signature": signature,
            "I-Twilio-Idempotency-Token": os.urandom(16).hex(),
            "User-Agent": WEBHOOK_USER_AGENT,
        }
        try:
            answer = session.post(url, data=params, headers=headers, timeout=timeout, allow_redirects=False)
        except requests.RequestException as exc:
            return Posted(url, params, signature, None, error=str(exc))
        return Posted(url, params, signature, answer.status_code, answer.text)


@pytest.fixture
def twilio_server():
    """A local Twilio (Messages API, status callbacks, inbound webhooks); see the module docstring."""
    with TwilioServer() as server:
        yield server


# Running on its own (`make run`, benchmarks).

ACCOUNT_FILE = "account.json"


@contextmanager
def serving_app(app, monkeypatch) -> Iterator[TwilioServer]:
    """A local Twilio this app sends its SMS through (SMS_PROVIDER=twilio); the process's clients closed after."""
    from app.providers.httpclients import close_all

    with TwilioServer(callback_delay=0) as server:
        for name, value in {**server.settings(), "SMS_PROVIDER": "twilio"}.items():
            monkeypatch.setitem(app.config, name, value)
        yield server
    close_all()


def main(argv: list[str] | None = None) -> int:
    """Serve a stand-in until SIGTERM or Ctrl-C, its credentials kept in --dir with settings.json."""
    found = standalone.parser("tests.support.twilio_server", "A local Twilio for development: the Messages API, "
                              "status callbacks and signed webhooks.", "the account's credentials")  # fmt: skip
    found.add_argument("--callback-delay", type=float, default=0.5, help="seconds between status callbacks")
    args = found.parse_args(argv)
    where = standalone.directory(args)

    def tell(to: str, status: int, what: str) -> None:
        # The number's last 4 digits only: it is somebody's phone.
        print(f"{status} {'send' if status == 201 else 'refused'} to …{to[-4:]}: {what!r}", flush=True)

    account = where / ACCOUNT_FILE
    known = json.loads(account.read_text()) if account.exists() else {}
    with TwilioServer(args.port, args.host, callback_delay=args.callback_delay, **known) as server:
        server.state.record = False
        server.state.on_send = None if args.quiet else tell
        if not known:
            standalone.write_json(account, {"account_sid": server.account_sid, "auth_token": server.auth_token,
                                            "from_number": server.from_number,
                                            "messaging_service_sid": server.messaging_service_sid})  # fmt: skip
            account.chmod(0o600)
        standalone.serve(where, server.settings(), f"Twilio stand-in on {server.origin} (account "
                         f"{server.account_sid}, from {server.from_number})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
