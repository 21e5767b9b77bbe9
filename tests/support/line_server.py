"""A local LINE Messaging API for tests: POST /v2/bot/message/push with retry keys, over HTTP.

LineServer runs a threaded HTTP server on 127.0.0.1. `settings()` gives LINE_CHANNEL_ACCESS_TOKEN and
LINE_API_BASE ("http://127.0.0.1:<port>", the `host` of line-bot-sdk's Configuration, which prefixes
"/v2/bot/message/push").

The push, as LINE answers it (developers.line.biz/en/reference/messaging-api/#send-push-message):
`Authorization: Bearer <channel access token>` (401 otherwise), a JSON body {"to": "U…"/"C…"/"R…", "messages":
[1 to 5 text or flex messages…]}; a malformed `to` is a 400 "The property, 'to', in the request body is
invalid…", other invalid fields a 400 "The request body has N error(s)" with details [{"message", "property"}].
Accepted pushes are in `received` and answered 200 {"sentMessages": [{"id", "quoteToken"}]}. Every answer carries
`x-line-request-id`.

X-Line-Retry-Key (a UUID): a push accepted with a key is done once. Another request with that key within
RETRY_KEY_TTL (24 hours) is a 409 {"message": "The retry key is already accepted", "sentMessages": […]} with
`x-line-accepted-request-id` naming the accepted request, and is not delivered again. A key that is not a UUID is
a 400. `script(user_id, status, message=None, times=None)` makes one recipient's pushes answer an error status
(400 "Failed to send messages", 403, 429 "The API rate limit has been exceeded…", 500…) before any delivery.

Run on its own (`make run` does), it serves until SIGTERM or Ctrl-C, keeping its token in a directory across
restarts and writing the LINE_* settings there:

    python -m tests.support.line_server --port 2200 --dir var/line      # then read var/line/settings.json
"""

from __future__ import annotations

import functools
import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from tests.support import standalone

PUSH_PATH = "/v2/bot/message/push"
RECIPIENT = re.compile(r"^[UCR][0-9a-f]{32}$")  # a user, group chat or multi-person chat id
UUID_FORM = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
RETRY_KEY_TTL = 24 * 3600.0  # LINE: "The retry key is valid for 24 hours after attempting the first request."
MAX_MESSAGES = 5
MAX_TEXT = 5000
MAX_ALT_TEXT = 1500
MESSAGE_TYPES = ("text", "sticker", "image", "video", "audio", "location", "imagemap", "template", "flex")
AUTH_FAILED = "Authentication failed. Confirm that the access token in the authorization header is valid."
NO_AUTH = "Authorization header required. Must follow the scheme, 'Authorization: Bearer <ACCESS TOKEN>'"
# The messages LINE's error responses carry, by status, for script() (the reference's error-response list).
MESSAGES = {
    400: "Failed to send messages",
    401: AUTH_FAILED,
    403: "Access to this API is not available for your account",
    409: "The retry key is already accepted",
    429: "The API rate limit has been exceeded. Try again later.",
    500: "Internal server error",
}


@dataclass
class Script:
    """How one recipient's pushes are answered: status with LINE's message, `times` times (None: every one)."""

    status: int
    message: str
    times: int | None = None
    after_delivery: bool = False  # deliver (and accept the retry key), then answer the error: a lost answer


@dataclass
class Pushed:
    """One accepted push."""

    to: str
    messages: list
    request_id: str
    retry_key: str | None
    sent: list  # the sentMessages answered
    body: dict
    headers: dict


@dataclass
class LineState:
    """What the stand-in knows and received (read by tests, under lock)."""

    token: str
    scripts: dict[str, Script] = field(default_factory=dict)
    accepted_keys: dict[str, tuple[float, str, list]] = field(default_factory=dict)  # key -> (at, request id, sent)
    received: list[Pushed] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)  # (status, message)
    conflicts: int = 0  # 409s answered for a retry key already accepted
    sequence: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    # A long-running stand-in (main()) keeps no lists: on_push hears of each push instead.
    record: bool = True
    on_push: Callable[[str, int, str], None] | None = None  # (to, status, first text or the error)


class LineServer:
    """The stand-in: `with LineServer() as line:` serves until the block ends."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", token: str | None = None) -> None:
        self.state = LineState(token=token or secrets.token_urlsafe(128))
        self.httpd = ThreadingHTTPServer((host, port), _handler(self.state))
        self.httpd.daemon_threads = True
        self.origin = f"http://{host}:{self.httpd.server_address[1]}"
        serve = functools.partial(self.httpd.serve_forever, poll_interval=0.05)
        self._thread = threading.Thread(target=serve, name="line-stand-in", daemon=True)

    def __enter__(self) -> LineServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def token(self) -> str:
        return self.state.token

    def settings(self, **overrides) -> dict:
        """The LINE_* settings that push here."""
        return {"LINE_CHANNEL_ACCESS_TOKEN": self.token, "LINE_API_BASE": self.origin, **overrides}

    def script(self, user_id: str, status: int, message: str | None = None, times: int | None = None,
               after_delivery: bool = False) -> None:  # fmt: skip
        """Answer pushes to user_id with status (and LINE's message for it), `times` times (None: always).

        after_delivery: the push is delivered (its retry key accepted) and then answered with the error, as when
        LINE's answer is lost after it accepted the request (a 5xx or a timeout that still sent the message).
        """
        if status not in MESSAGES and message is None:
            raise KeyError(f"no LINE message known for status {status}; pass message=")
        with self.state.lock:
            self.state.scripts[user_id] = Script(status, message or MESSAGES[status], times, after_delivery)

    def unscript(self, user_id: str) -> None:
        with self.state.lock:
            self.state.scripts.pop(user_id, None)

    def expire_retry_keys(self) -> None:
        """Forget every accepted retry key, as 24 hours passing would."""
        with self.state.lock:
            self.state.accepted_keys.clear()

    @property
    def received(self) -> list[Pushed]:
        with self.state.lock:
            return list(self.state.received)

    @property
    def rejected(self) -> list[tuple[int, str]]:
        with self.state.lock:
            return list(self.state.rejected)

    @property
    def conflicts(self) -> int:
        return self.state.conflicts

    def received_by(self, user_id: str) -> list[Pushed]:
        return [p for p in self.received if p.to == user_id]


def _take_script(state: LineState, to: str) -> Script | None:
    """The script for a recipient, counting one use (under the caller's lock)."""
    script = state.scripts.get(to)
    if script is not None and script.times is not None:
        script.times -= 1
        if script.times <= 0:
            del state.scripts[to]
    return script


def _body_errors(payload: dict) -> list[tuple[str, str]]:
    """LINE's validation of a push body beyond `to`: [(property, message)], empty when it is fine."""
    messages = payload.get("messages")
    if not isinstance(messages, list) or not 1 <= len(messages) <= MAX_MESSAGES:
        return [("messages", f"Size must be between 1 and {MAX_MESSAGES}")]
    found = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        kind = message.get("type") if isinstance(message, dict) else None
        if kind not in MESSAGE_TYPES:
            found.append((f"{where}.type", f"Must be one of the following values: [{', '.join(MESSAGE_TYPES)}]"))
        elif kind == "text":
            text = message.get("text")
            if not isinstance(text, str) or not text:
                found.append((f"{where}.text", "May not be empty"))
            elif len(text.encode("utf-16-le")) // 2 > MAX_TEXT:  # LINE counts UTF-16 code units
                found.append((f"{where}.text", f"Length must be between 0 and {MAX_TEXT}"))
        elif kind == "flex":
            alt = message.get("altText")
            if not isinstance(alt, str) or not alt:
                found.append((f"{where}.altText", "May not be empty"))
            elif len(alt) > MAX_ALT_TEXT:
                found.append((f"{where}.altText", f"Length must be between 0 and {MAX_ALT_TEXT}"))
            contents = message.get("contents")
            if not isinstance(contents, dict) or contents.get("type") not in ("bubble", "carousel"):
                found.append((f"{where}.contents", "Must be one of the following values: [bubble, carousel]"))
    return found


def _handler(state: LineState):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30

        def log_message(self, *args) -> None:  # keep test output quiet
            return

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.request_id = str(uuid.uuid4())
            if urlsplit(self.path).path != PUSH_PATH:
                return self._json(404, {"message": "Not found"})
            self._push(body)

        def _push(self, body: bytes) -> None:
            scheme, _, bearer = self.headers.get("Authorization", "").partition(" ")
            if scheme != "Bearer" or not bearer:
                return self._refuse(401, NO_AUTH)
            if not secrets.compare_digest(bearer.strip(), state.token):
                return self._refuse(401, AUTH_FAILED)
            content_type = self.headers.get("Content-Type", "").split(";")[0].strip()
            if content_type != "application/json":
                return self._refuse(400, f"The content type, {content_type or 'none'}, is not supported")
            try:
                payload = json.loads(body)
            except ValueError as exc:
                line, column = getattr(exc, "lineno", "-"), getattr(exc, "colno", "-")
                return self._refuse(400, f"The request body could not be parsed as JSON (line: {line}, column: "
                                         f"{column})")  # fmt: skip
            if not isinstance(payload, dict):
                return self._refuse(400, "The request body could not be parsed as JSON (line: 1, column: 1)")
            to = payload.get("to")
            if not isinstance(to, str) or not RECIPIENT.match(to):
                return self._refuse(400, "The property, 'to', in the request body is invalid (line: -, column: -)")
            errors = _body_errors(payload)
            if errors:
                details = [{"message": m, "property": p} for p, m in errors]
                return self._refuse(400, f"The request body has {len(errors)} error(s)", details)
            key = self.headers.get("X-Line-Retry-Key")
            if key is not None and not UUID_FORM.match(key):
                return self._refuse(400, "The value of the X-Line-Retry-Key header is invalid")
            with state.lock:  # one step, so that two requests with the same key deliver once
                accepted = self._accepted(key)
                script = None if accepted is not None else _take_script(state, to)
                if accepted is not None:
                    state.conflicts += 1
                elif script is None or script.after_delivery:
                    sent = self._deliver(to, payload, key)
            if accepted is not None:
                # Already done once: answer what was sent and which request did it, and deliver nothing.
                body = {"message": MESSAGES[409], "sentMessages": accepted[2]}
                return self._json(409, body, {"x-line-accepted-request-id": accepted[1]})
            if script is not None:
                return self._refuse(script.status, script.message, to=to)
            if state.on_push is not None:
                first = payload["messages"][0]
                state.on_push(to, 200, str(first.get("text") or first.get("altText") or first["type"]))
            self._json(200, {"sentMessages": sent})

        def _accepted(self, key: str | None) -> tuple[float, str, list] | None:
            """The earlier acceptance of this retry key within its 24 hours (under the caller's lock)."""
            if key is None:
                return None
            accepted = state.accepted_keys.get(key.lower())
            if accepted is not None and time.monotonic() - accepted[0] > RETRY_KEY_TTL:
                del state.accepted_keys[key.lower()]
                return None
            return accepted

        def _deliver(self, to: str, payload: dict, key: str | None) -> list:
            """Deliver the push and accept its retry key (under the caller's lock); its sentMessages."""
            sent = []
            for message in payload["messages"]:
                state.sequence += 1
                item = {"id": str(500_000_000_000_000_000 + state.sequence)}
                if message["type"] in ("text", "sticker", "image", "video", "template", "flex"):
                    item["quoteToken"] = secrets.token_urlsafe(48)  # the quotable kinds carry one
                sent.append(item)
            if key is not None:
                state.accepted_keys[key.lower()] = (time.monotonic(), self.request_id, sent)
            if state.record:
                headers = {k.lower(): v for k, v in self.headers.items()}
                state.received.append(Pushed(to, payload["messages"], self.request_id, key, sent, payload, headers))
            return sent

        def _refuse(self, status: int, message: str, details: list | None = None, to: str = "") -> None:
            with state.lock:
                if state.record:
                    state.rejected.append((status, message))
            if state.on_push is not None:
                state.on_push(to, status, message)
            self._json(status, {"message": message, **({"details": details} if details else {})})

        def _json(self, status: int, body: dict, headers: dict | None = None) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("x-line-request-id", self.request_id)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


@pytest.fixture
def line_server():
    """A local LINE Messaging API push endpoint; see the module docstring."""
    with LineServer() as server:
        yield server


# Running on its own (`make run`).

TOKEN_FILE = "channel-access-token"


def main(argv: list[str] | None = None) -> int:
    """Serve a stand-in until SIGTERM or Ctrl-C, its token kept in --dir with settings.json."""
    found = standalone.parser("tests.support.line_server", "A local LINE Messaging API for development: push "
                              "messages.", "the channel access token")  # fmt: skip
    args = found.parse_args(argv)
    where = standalone.directory(args)
    token_file = where / TOKEN_FILE
    token = token_file.read_text().strip() if token_file.exists() else None

    def tell(to: str, status: int, what: str) -> None:
        # The recipient's last 6 characters only: a LINE user id is personal data.
        print(f"{status} {'push' if status == 200 else 'refused'} to …{to[-6:]}: {what[:80]!r}", flush=True)

    with LineServer(args.port, args.host, token) as server:
        server.state.record = False
        server.state.on_push = None if args.quiet else tell
        token_file.write_text(server.token)
        token_file.chmod(0o600)
        standalone.serve(where, server.settings(), f"LINE stand-in on {server.origin}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
