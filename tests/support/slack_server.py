"""A local Slack for tests: the Web API's chat.postMessage (and auth.test) and incoming webhooks, over HTTP.

SlackServer runs a threaded HTTP server on 127.0.0.1. `settings()` gives SLACK_BOT_TOKEN and SLACK_API_BASE
("http://127.0.0.1:<port>/api/", what slack_sdk's WebClient(base_url=...) joins method names to).

POST /api/chat.postMessage, as Slack answers it: the bot token as `Authorization: Bearer xoxb-…` (or a `token`
form field), a JSON or form body with `channel` and `text` and/or `blocks`/`attachments`. Accepted posts are in
`received` and answered 200 {"ok": true, "channel", "ts", "message"}; refusals are HTTP 200 {"ok": false,
"error": …} (not_authed, invalid_auth, channel_not_found, no_text, msg_too_long, invalid_blocks…) except
"ratelimited", a 429 with Retry-After. `enforce_rate=True` applies Slack's documented limit of about one message
a second per channel (a second post within the second is a 429). `script(channel, error, retry_after=, times=)`
makes one channel's posts answer with one of API_ERRORS.

POST /services/T…/B…/<secret> (an incoming webhook; `webhook_url(name)` makes one): a JSON body (or a form's
`payload`) answered 200 "ok" as text, or Slack's webhook errors as text: 400 invalid_payload / no_text,
403 invalid_token / action_prohibited, 404 no_service (unknown or removed, see `remove_webhook`), 410
channel_is_archived, 429 rate_limited… `script(name, error)` works for a webhook's name too.

Run on its own (`make run` does), it serves until SIGTERM or Ctrl-C, keeping its token and webhooks in a
directory across restarts and writing the settings that reach it there:

    python -m tests.support.slack_server --port 2199 --dir var/slack      # then read var/slack/settings.json
"""

from __future__ import annotations

import functools
import json
import secrets
import string
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support import standalone

TEAM_ID = "T0HATO0001"
BOT_USER_ID = "U0HATOBOT1"
BOT_ID = "B0HATOBOT1"
APP_ID = "A0HATOAPP1"
MAX_TEXT = 40_000  # chat.postMessage: longer text is msg_too_long
MAX_BLOCKS = 50
RATE_WINDOW = 1.0  # seconds: Slack's "about one message per second" per channel

# chat.postMessage's errors (docs.slack.dev/reference/methods/chat.postMessage): every one is HTTP 200 with
# {"ok": false, "error": <name>} except ratelimited, a 429 with Retry-After.
API_ERRORS = frozenset({
    "channel_not_found", "not_in_channel", "is_archived", "msg_too_long", "no_text", "restricted_action",
    "too_many_attachments", "invalid_blocks", "invalid_blocks_format", "account_inactive", "invalid_auth",
    "not_authed", "token_revoked", "missing_scope", "ratelimited", "internal_error", "fatal_error",
    "service_unavailable", "team_access_not_granted", "request_timeout",
})  # fmt: skip
# Incoming webhooks answer plain-text error names with these statuses (Slack's 2016-05-17 changelog, and the
# incoming-webhook documentation's error list).
WEBHOOK_ERRORS: dict[str, int] = {
    "invalid_payload": 400, "user_not_found": 400, "no_text": 400, "too_many_attachments": 400,
    "invalid_blocks": 400, "action_prohibited": 403, "invalid_token": 403, "posting_to_general_channel_denied": 403,
    "channel_not_found": 404, "no_service": 404, "no_team": 404, "channel_is_archived": 410, "rate_limited": 429,
    "rollup_error": 500,
}  # fmt: skip


@dataclass
class Script:
    """How one channel's (or webhook's) posts are answered: an error, `times` times (None: every one)."""

    error: str
    retry_after: int | None = None
    times: int | None = None


@dataclass
class Posted:
    """One accepted chat.postMessage."""

    channel: str
    ts: str
    text: str | None
    blocks: list | None
    body: dict
    headers: dict


@dataclass
class Hook:
    """An incoming webhook this server knows: /services/<team>/<hook_id>/<secret>."""

    name: str
    team: str
    hook_id: str
    secret: str
    channel: str
    removed: bool = False


@dataclass
class Hooked:
    """One accepted incoming-webhook post."""

    name: str
    body: dict
    headers: dict


@dataclass
class SlackState:
    """What the stand-in knows and received (read by tests, under lock)."""

    token: str
    enforce_rate: bool = False
    hooks: dict[str, Hook] = field(default_factory=dict)  # by name
    scripts: dict[str, Script] = field(default_factory=dict)  # by channel or webhook name
    received: list[Posted] = field(default_factory=list)
    hooked: list[Hooked] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (channel or webhook name, error)
    last_post: dict[str, float] = field(default_factory=dict)  # channel or webhook -> monotonic time of its last
    sequence: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    # A long-running stand-in (main()) keeps no lists: on_post hears of each post instead.
    record: bool = True
    on_post: Callable[[str, str, str], None] | None = None  # (channel or webhook, "ok" or the error, text)


def _random(prefix: str, length: int, alphabet: str = string.ascii_uppercase + string.digits) -> str:
    return prefix + "".join(secrets.choice(alphabet) for _ in range(length))


class SlackServer:
    """The stand-in: `with SlackServer() as slack:` serves until the block ends."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", token: str | None = None,
                 enforce_rate: bool = False) -> None:  # fmt: skip
        token = token or f"xoxb-{secrets.randbelow(10**12)}-{secrets.randbelow(10**12)}-{_random('', 24)}"
        self.state = SlackState(token=token, enforce_rate=enforce_rate)
        self.httpd = ThreadingHTTPServer((host, port), _handler(self.state))
        self.httpd.daemon_threads = True
        self.origin = f"http://{host}:{self.httpd.server_address[1]}"
        serve = functools.partial(self.httpd.serve_forever, poll_interval=0.05)
        self._thread = threading.Thread(target=serve, name="slack-stand-in", daemon=True)

    def __enter__(self) -> SlackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- settings

    @property
    def token(self) -> str:
        return self.state.token

    @property
    def api_base(self) -> str:
        return f"{self.origin}/api/"

    def settings(self, **overrides) -> dict:
        """The SLACK_* settings that post here."""
        return {"SLACK_BOT_TOKEN": self.token, "SLACK_API_BASE": self.api_base, **overrides}

    def webhook_url(self, name: str = "default", channel: str = "C0HATOHOOK") -> str:
        """The incoming-webhook URL called name (made on first use) that posts to channel."""
        with self.state.lock:
            hook = self.state.hooks.get(name)
            if hook is None:
                hook = Hook(name, TEAM_ID, _random("B", 10), _random("", 24, string.ascii_letters + string.digits),
                            channel)  # fmt: skip
                self.state.hooks[name] = hook
        return f"{self.origin}/services/{hook.team}/{hook.hook_id}/{hook.secret}"

    def remove_webhook(self, name: str) -> None:
        """Uninstall a webhook: its URL answers 404 no_service from now on."""
        with self.state.lock:
            self.state.hooks[name].removed = True

    # -- scripting

    def script(self, target: str, error: str, retry_after: int | None = None, times: int | None = None) -> None:
        """Answer target's posts (a channel, or a webhook's name) with error, `times` times (None: always)."""
        if error not in API_ERRORS and error not in WEBHOOK_ERRORS:
            raise KeyError(f"unknown Slack error {error!r}")
        with self.state.lock:
            self.state.scripts[target] = Script(error, retry_after, times)

    def unscript(self, target: str) -> None:
        with self.state.lock:
            self.state.scripts.pop(target, None)

    # -- reading

    @property
    def received(self) -> list[Posted]:
        with self.state.lock:
            return list(self.state.received)

    @property
    def webhook_received(self) -> list[Hooked]:
        with self.state.lock:
            return list(self.state.hooked)

    @property
    def rejected(self) -> list[tuple[str, str]]:
        with self.state.lock:
            return list(self.state.rejected)

    def received_in(self, channel: str) -> list[Posted]:
        return [p for p in self.received if p.channel == channel]


def _take_script(state: SlackState, target: str) -> Script | None:
    """The script for target, counting one use (under the caller's lock)."""
    script = state.scripts.get(target)
    if script is not None and script.times is not None:
        script.times -= 1
        if script.times <= 0:
            del state.scripts[target]
    return script


def _too_soon(state: SlackState, target: str) -> bool:
    """Whether target posted less than RATE_WINDOW ago (under the caller's lock); counts this post if not."""
    now = time.monotonic()
    if not state.enforce_rate:
        return False
    if now - state.last_post.get(target, -RATE_WINDOW) < RATE_WINDOW:
        return True
    state.last_post[target] = now
    return False


def _blocks_error(blocks) -> str | None:
    if blocks is None:
        return None
    if not isinstance(blocks, list):
        return "invalid_blocks_format"
    if len(blocks) > MAX_BLOCKS or not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in blocks):
        return "invalid_blocks"
    return None


def _handler(state: SlackState):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30

        def log_message(self, *args) -> None:  # keep test output quiet
            return

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = urlsplit(self.path).path
            if path.startswith("/services/"):
                return self._webhook(path, body)
            method = path.removeprefix("/api/") if path.startswith("/api/") else None
            if method == "chat.postMessage":
                return self._post_message(body)
            if method == "auth.test":
                return self._auth_test(body)
            self._json(404, {"ok": False, "error": "unknown_method", "req_method": method or path})

        # -- the Web API

        def _args(self, body: bytes) -> tuple[dict | None, str | None, list[str]]:
            """The call's arguments, its token and Slack's warnings; None arguments: a body Slack cannot read."""
            content_type = self.headers.get("Content-Type", "")
            media = content_type.split(";")[0].strip().lower()
            scheme, _, bearer = self.headers.get("Authorization", "").partition(" ")
            token = bearer.strip() if scheme == "Bearer" else None
            warnings = []
            if media == "application/json":
                if "charset" not in content_type.lower():
                    warnings.append("missing_charset")
                try:
                    args = json.loads(body or b"{}")
                except ValueError:
                    return None, token, warnings
                return (args if isinstance(args, dict) else None), token, warnings
            form = {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
            for key in ("blocks", "attachments"):  # form posts carry these as JSON strings
                if key in form:
                    try:
                        form[key] = json.loads(form[key])
                    except ValueError:
                        form[key] = "not json"
            # JSON calls must carry the token in the header; form posts may also send it as a field.
            return form, token or form.pop("token", None), warnings

        def _auth_error(self, token: str | None) -> str | None:
            if not token:
                return "not_authed"
            return None if secrets.compare_digest(token, state.token) else "invalid_auth"

        def _post_message(self, body: bytes) -> None:
            args, token, warnings = self._args(body)
            error = self._auth_error(token)
            if error is None and args is None:
                error = "invalid_json"
            if error is not None:
                return self._refuse("", error)
            channel = str(args.get("channel") or "")
            if not channel:
                return self._refuse("", "channel_not_found")
            with state.lock:
                script = _take_script(state, channel)
            if script is not None:
                return self._refuse(channel, script.error, script.retry_after)
            text, blocks, attachments = args.get("text"), args.get("blocks"), args.get("attachments")
            error = _blocks_error(blocks)
            if error is None and not (text or blocks or attachments):
                error = "no_text"
            if error is None and isinstance(text, str) and len(text) > MAX_TEXT:
                error = "msg_too_long"
            if error is None and attachments is not None and (not isinstance(attachments, list)
                                                              or len(attachments) > 100):  # fmt: skip
                error = "too_many_attachments"
            if error is not None:
                return self._refuse(channel, error)
            with state.lock:
                if _too_soon(state, channel):
                    limited = True
                else:
                    limited = False
                    state.sequence += 1
                    ts = f"{int(time.time())}.{state.sequence % 1_000_000:06d}"
            if limited:
                return self._refuse(channel, "ratelimited", 1)
            message = {"user": BOT_USER_ID, "type": "message", "ts": ts, "bot_id": BOT_ID, "app_id": APP_ID,
                       "text": text or "", "team": TEAM_ID}  # fmt: skip
            if blocks:
                message["blocks"] = blocks
            if attachments:
                message["attachments"] = attachments
            with state.lock:
                if state.record:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    state.received.append(Posted(channel, ts, text, blocks, args, headers))
            if state.on_post is not None:
                state.on_post(channel, "ok", str(text or ""))
            answer = {"ok": True, "channel": channel, "ts": ts, "message": message}
            if warnings:
                answer |= {"warning": ",".join(warnings), "response_metadata": {"warnings": warnings}}
            self._json(200, answer)

        def _auth_test(self, body: bytes) -> None:
            _, token, _ = self._args(body)
            error = self._auth_error(token)
            if error is not None:
                return self._json(200, {"ok": False, "error": error})
            self._json(200, {"ok": True, "url": "https://hato-test.slack.com/", "team": "Hato Test", "user": "hato",
                             "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID,
                             "is_enterprise_install": False})  # fmt: skip

        def _refuse(self, channel: str, error: str, retry_after: int | None = None) -> None:
            with state.lock:
                if state.record:
                    state.rejected.append((channel, error))
            if state.on_post is not None:
                state.on_post(channel, error, "")
            if error == "ratelimited":
                return self._json(429, {"ok": False, "error": error}, {"Retry-After": str(retry_after or 1)})
            self._json(200, {"ok": False, "error": error})

        # -- incoming webhooks

        def _webhook(self, path: str, body: bytes) -> None:
            parts = path.split("/")  # "", "services", team, hook id, secret
            with state.lock:
                hook = next((h for h in state.hooks.values() if len(parts) == 5 and h.hook_id == parts[3]), None)
            if hook is None or hook.removed:
                return self._text(404, "no_service")
            if parts[2] != hook.team:
                return self._text(404, "no_team")
            if not secrets.compare_digest(parts[4], hook.secret):
                return self._text(403, "invalid_token")
            with state.lock:
                script = _take_script(state, hook.name)
            if script is not None:
                return self._hook_refuse(hook.name, script.error, script.retry_after)
            payload = self._webhook_payload(body)
            if payload is None:
                return self._hook_refuse(hook.name, "invalid_payload")
            error = _blocks_error(payload.get("blocks"))
            if error is None and not (payload.get("text") or payload.get("blocks") or payload.get("attachments")):
                error = "no_text"
            if error is not None:
                return self._hook_refuse(hook.name, "invalid_blocks" if error.startswith("invalid") else error)
            with state.lock:
                limited = _too_soon(state, f"hook:{hook.name}")
                if not limited and state.record:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    state.hooked.append(Hooked(hook.name, payload, headers))
            if limited:
                return self._hook_refuse(hook.name, "rate_limited", 1)
            if state.on_post is not None:
                state.on_post(f"webhook {hook.name}", "ok", str(payload.get("text") or ""))
            self._text(200, "ok")

        def _webhook_payload(self, body: bytes) -> dict | None:
            media = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
            raw: bytes | str = body
            if media == "application/x-www-form-urlencoded":  # the legacy payload=<json> form
                raw = parse_qs(body.decode("utf-8", "replace")).get("payload", [""])[-1]
            try:
                payload = json.loads(raw)
            except ValueError:
                return None
            return payload if isinstance(payload, dict) else None

        def _hook_refuse(self, name: str, error: str, retry_after: int | None = None) -> None:
            with state.lock:
                if state.record:
                    state.rejected.append((name, error))
            if state.on_post is not None:
                state.on_post(f"webhook {name}", error, "")
            status = WEBHOOK_ERRORS.get(error, 400)
            headers = {"Retry-After": str(retry_after or 1)} if status == 429 else {}
            self._text(status, error, headers)

        # -- answers

        def _json(self, status: int, body: dict, headers: dict | None = None) -> None:
            self._send(status, json.dumps(body).encode(), "application/json; charset=utf-8", headers)

        def _text(self, status: int, text: str, headers: dict | None = None) -> None:
            self._send(status, text.encode(), "text/html", headers)  # what hooks.slack.com labels its answers

        def _send(self, status: int, raw: bytes, content_type: str, headers: dict | None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


@pytest.fixture
def slack_server():
    """A local Slack Web API and incoming webhooks; see the module docstring."""
    with SlackServer() as server:
        yield server


# Running on its own (`make run`).

STATE_FILE = "slack.json"


def main(argv: list[str] | None = None) -> int:
    """Serve a stand-in until SIGTERM or Ctrl-C, its token and webhooks kept in --dir with settings.json."""
    found = standalone.parser("tests.support.slack_server", "A local Slack for development: chat.postMessage and "
                              "webhooks.", "the token and the webhooks")  # fmt: skip
    found.add_argument("--enforce-rate", action="store_true", help="one message a second per channel, as Slack")
    args = found.parse_args(argv)
    where = standalone.directory(args)
    kept_file = where / STATE_FILE
    kept = json.loads(kept_file.read_text()) if kept_file.exists() else {}

    def tell(target: str, outcome: str, text: str) -> None:
        print(f"{'posted' if outcome == 'ok' else 'refused (' + outcome + ')'} to {target}: {text[:80]!r}", flush=True)

    with SlackServer(args.port, args.host, kept.get("token"), args.enforce_rate) as server:
        server.state.record = False
        server.state.on_post = None if args.quiet else tell
        for hook in kept.get("hooks", []):
            server.state.hooks[hook["name"]] = Hook(**hook)
        webhook = server.webhook_url("default")
        hooks = [asdict(h) for h in server.state.hooks.values()]
        standalone.write_json(kept_file, {"token": server.token, "hooks": hooks})
        kept_file.chmod(0o600)
        standalone.serve(where, server.settings(SLACK_WEBHOOK_URL=webhook), f"Slack stand-in on {server.origin}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
