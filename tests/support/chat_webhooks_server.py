"""A local Discord and Microsoft Teams for tests: Discord's execute-webhook and Teams Workflows' trigger, over TLS.

ChatWebhooksServer runs a threaded HTTPS server (HTTP/1.1, keep-alive) on 127.0.0.1 whose certificate comes from a
trustme CA; `ca_path` is that CA's PEM. `url_for("discord" | "teams", name)` makes (on first use) a webhook and
gives its URL; `remove(kind, name)` deletes it (its URL answers 404 from then on).

Discord, POST /api[/v10]/webhooks/<id>/<token> (discord.com/developers/docs/resources/webhook#execute-webhook):
JSON with `content` (up to 2000 characters) and/or `embeds` (up to 10, 6000 characters in all). Answered 204, or
200 with the created message when `?wait=true`. An empty message is a 400 {"message": "Cannot send an empty
message", "code": 50006}; other invalid fields a 400 {"code": 50035, "message": "Invalid Form Body", "errors":
{...}}; a bad body a 400 50109; an unknown or deleted webhook a 404 {"message": "Unknown Webhook", "code":
10015}; a wrong token a 401 50027. Every answer carries X-RateLimit-Limit/-Remaining/-Reset/-Reset-After/-Bucket
(5 requests per 2 s per webhook, which `enforce_rate=True` applies); a 429 is {"message": "You are being rate
limited.", "retry_after": <s>, "global": false} with Retry-After and X-RateLimit-Scope.

Teams, POST /workflows/<id>/triggers/manual/paths/invoke?api-version=…&sp=…&sv=1.0&sig=… (the URL the Workflows
app's "When a Teams webhook request is received" trigger gives; `/workflows/<id>?sig=…` is taken too): JSON
{"type": "message", "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "content":
{"type": "AdaptiveCard", "version": "1.4"…, "body": [...]}}]}, answered 202 Accepted with no body. A body that is
not JSON is a 400 InvalidRequestContent; a wrong sig a 401; a removed flow a 404. The real trigger accepts any JSON
with a 202 and the flow's run fails later on a bad card; `strict_cards=True` (the default) answers an invalid
envelope or card with a 400 at once (as the trigger does with schema validation on), `strict_cards=False` answers
202 and lists the failed run in `failed_runs` instead.

`script(url_or_path, status, retry_after=None, times=None)` makes one webhook answer an error status in its
service's shape. Accepted posts are in `received` (and `received_at(url)`), refusals in `rejected`.

Run on its own (`make run` does), it serves until SIGTERM or Ctrl-C, keeping its CA, certificate and webhooks in a
directory across restarts and writing the settings that reach it there:

    python -m tests.support.chat_webhooks_server --port 2201 --dir var/chat-webhooks
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import secrets
import ssl
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import trustme

from tests.support import standalone
from tests.support.fcm_server import _TlsServer

DISCORD_PATH = re.compile(r"^/api(?:/v\d+)?/webhooks/(\d+)/([^/]+)$")
TEAMS_PATH = re.compile(r"^/workflows/([0-9a-f]{32})(?:/triggers/manual/paths/invoke)?$")
ADAPTIVE = "application/vnd.microsoft.card.adaptive"
MAX_CARD_VERSION = (1, 4)  # Workflows' card posting refuses newer cards (reported for 1.5)
DISCORD_RATE = (5, 2.0)  # requests, per seconds, per webhook: what Discord's headers show for webhooks
MAX_CONTENT, MAX_EMBEDS, MAX_EMBED_TOTAL = 2000, 10, 6000
EMBED_LIMITS = {"title": 256, "description": 4096}
DISCORD_ERRORS = {  # what script() answers for a status, in Discord's JSON error shape
    400: {"message": "Cannot send an empty message", "code": 50006},
    401: {"message": "Invalid Webhook Token", "code": 50027},
    403: {"message": "Missing Permissions", "code": 50013},
    404: {"message": "Unknown Webhook", "code": 10015},
    500: {"message": "500: Internal Server Error", "code": 0},
    502: {"message": "502: Bad Gateway", "code": 0},
    503: {"message": "503: Service Unavailable", "code": 0},
}
TEAMS_ERRORS = {  # Azure Logic Apps' error codes for a request trigger (Workflows runs on it)
    400: "InvalidRequestContent",
    401: "DirectApiInvalidAuthorizationSignature",
    404: "WorkflowNotFound",
    429: "WorkflowRequestsThrottled",
    500: "InternalServerError",
    502: "BadGateway",
    503: "ServiceUnavailable",
}


@dataclass
class Hook:
    """A webhook the server knows: Discord's (id, token) or a Teams flow's (id, sig)."""

    kind: str  # "discord" or "teams"
    name: str
    id: str
    secret: str  # Discord's token, or the flow URL's sig
    removed: bool = False

    @property
    def key(self) -> str:
        """The path scripts and `received` are keyed by."""
        return f"/api/webhooks/{self.id}/{self.secret}" if self.kind == "discord" else f"/workflows/{self.id}"


@dataclass
class Script:
    """How one webhook's posts are answered: status, `times` times (None: every one)."""

    status: int
    retry_after: float | None = None
    times: int | None = None


@dataclass
class Received:
    """One accepted post."""

    kind: str
    name: str
    path: str  # the hook's key
    body: dict
    query: dict
    headers: dict
    message_id: str = ""  # Discord's created message id


@dataclass
class ChatState:
    """What the stand-in knows and received (read by tests, under lock)."""

    origin: str = ""
    enforce_rate: bool = False
    strict_cards: bool = True
    hooks: dict[tuple[str, str], Hook] = field(default_factory=dict)  # (kind, name) -> hook
    scripts: dict[str, Script] = field(default_factory=dict)  # hook key -> script
    received: list[Received] = field(default_factory=list)
    rejected: list[tuple[str, int, str]] = field(default_factory=list)  # (hook key or path, status, why)
    failed_runs: list[tuple[str, str]] = field(default_factory=list)  # (flow key, why): accepted, then failed
    recent: dict[str, deque] = field(default_factory=dict)  # Discord hook id -> monotonic times of recent posts
    sequence: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    # A long-running stand-in (main()) keeps no lists: on_post hears of each post instead.
    record: bool = True
    on_post: Callable[[str, str, int, str], None] | None = None  # (kind, name, status, text or why)

    def find(self, kind: str, hook_id: str) -> Hook | None:
        return next((h for h in self.hooks.values() if h.kind == kind and h.id == hook_id), None)


def _tls_context(directory: Path, host: str, reuse: bool) -> ssl.SSLContext:
    """A server context whose certificate a CA in directory/ca.pem signed (made unless reuse finds them)."""
    ca_path, cert_file, cert_key = directory / "ca.pem", directory / "cert.pem", directory / "cert.key"
    if not (reuse and all(p.exists() for p in (ca_path, cert_file, cert_key))):
        ca = trustme.CA()
        cert = ca.issue_cert(*dict.fromkeys(("127.0.0.1", "localhost", host)))
        ca.cert_pem.write_to_path(str(ca_path))
        cert.private_key_pem.write_to_path(str(cert_key))
        for i, pem in enumerate(cert.cert_chain_pems):
            pem.write_to_path(str(cert_file), append=i > 0)
        cert_key.chmod(0o600)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert_file), str(cert_key))
    return context


class ChatWebhooksServer:
    """The stand-in: `with ChatWebhooksServer() as hooks:` serves until the block ends."""

    def __init__(self, port: int = 0, directory: Path | str | None = None, host: str = "127.0.0.1",
                 enforce_rate: bool = False, strict_cards: bool = True) -> None:  # fmt: skip
        self.state = ChatState(enforce_rate=enforce_rate, strict_cards=strict_cards)
        self._own_dir = directory is None
        self._dir = Path(tempfile.mkdtemp(prefix="hato-chat-")) if directory is None else Path(directory)
        self.ca_path = str(self._dir / "ca.pem")
        context = _tls_context(self._dir, host, reuse=not self._own_dir)
        self.httpd = _TlsServer((host, port), _handler(self.state), context)
        self.state.origin = f"https://{host}:{self.httpd.server_address[1]}"
        serve = functools.partial(self.httpd.serve_forever, poll_interval=0.05)
        self._thread = threading.Thread(target=serve, name="chat-webhooks-stand-in", daemon=True)

    def __enter__(self) -> ChatWebhooksServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._own_dir:
            for path in self._dir.iterdir():
                path.unlink()
            self._dir.rmdir()

    @property
    def origin(self) -> str:
        return self.state.origin

    # -- webhooks

    def url_for(self, kind: str, name: str = "default") -> str:
        """The URL of the Discord webhook or Teams flow called name, made on first use."""
        hook = self._hook(kind, name)
        if kind == "discord":
            return f"{self.origin}{hook.key}"
        return (f"{self.origin}/workflows/{hook.id}/triggers/manual/paths/invoke?api-version=2016-06-01"
                f"&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={hook.secret}")  # fmt: skip

    def _hook(self, kind: str, name: str) -> Hook:
        if kind not in ("discord", "teams"):
            raise ValueError(f"kind must be 'discord' or 'teams', not {kind!r}")
        with self.state.lock:
            hook = self.state.hooks.get((kind, name))
            if hook is None:
                if kind == "discord":  # a snowflake id and a 68-character token, as Discord's
                    hook = Hook(kind, name, str(1_200_000_000_000_000_000 + secrets.randbelow(10**17)),
                                secrets.token_urlsafe(51))  # fmt: skip
                else:
                    hook = Hook(kind, name, uuid.uuid4().hex, secrets.token_urlsafe(32))
                self.state.hooks[(kind, name)] = hook
        return hook

    def remove(self, kind: str, name: str = "default") -> None:
        """Delete a Discord webhook or Teams flow: its URL answers 404 from then on."""
        with self.state.lock:
            self.state.hooks[(kind, name)].removed = True

    def settings(self, **overrides) -> dict:
        """What a client needs to post to the default webhooks here."""
        return {
            "CHAT_WEBHOOK_CA_FILE": self.ca_path,
            "DISCORD_WEBHOOK_URL": self.url_for("discord"),
            "TEAMS_WORKFLOW_URL": self.url_for("teams"),
            **overrides,
        }

    # -- scripting

    def script(self, target: str, status: int, retry_after: float | None = None, times: int | None = None) -> None:
        """Answer the webhook at target (its URL or path) with status, `times` times (None: always)."""
        key = _key(urlsplit(target).path)
        if key is None:
            raise ValueError(f"not a Discord webhook or Teams flow path: {target!r}")
        with self.state.lock:
            self.state.scripts[key] = Script(status, retry_after, times)

    def unscript(self, target: str) -> None:
        with self.state.lock:
            self.state.scripts.pop(_key(urlsplit(target).path) or "", None)

    # -- reading

    @property
    def received(self) -> list[Received]:
        with self.state.lock:
            return list(self.state.received)

    @property
    def rejected(self) -> list[tuple[str, int, str]]:
        with self.state.lock:
            return list(self.state.rejected)

    @property
    def failed_runs(self) -> list[tuple[str, str]]:
        with self.state.lock:
            return list(self.state.failed_runs)

    def received_at(self, target: str) -> list[Received]:
        """The accepted posts to one webhook (its URL or path)."""
        key = _key(urlsplit(target).path)
        return [r for r in self.received if r.path == key]


def _key(path: str) -> str | None:
    """A webhook path's canonical form (no API version, no trigger suffix); None if it is neither kind."""
    match = DISCORD_PATH.match(path)
    if match:
        return f"/api/webhooks/{match.group(1)}/{match.group(2)}"
    match = TEAMS_PATH.match(path)
    return f"/workflows/{match.group(1)}" if match else None


def _take_script(state: ChatState, key: str) -> Script | None:
    """The script for a hook, counting one use (under the caller's lock)."""
    script = state.scripts.get(key)
    if script is not None and script.times is not None:
        script.times -= 1
        if script.times <= 0:
            del state.scripts[key]
    return script


def _form_error(errors: dict) -> dict:
    return {"code": 50035, "errors": errors, "message": "Invalid Form Body"}


def _too_long(code: str, limit: int) -> dict:
    return {"_errors": [{"code": code, "message": f"Must be {limit} or fewer in length."}]}


def _discord_errors(payload: dict) -> dict | None:
    """Discord's refusal of an execute-webhook body, or None when it is fine."""
    content, embeds = payload.get("content"), payload.get("embeds")
    if not content and not embeds and not payload.get("components") and not payload.get("poll"):
        return DISCORD_ERRORS[400]
    errors: dict = {}
    if content is not None and (not isinstance(content, str) or len(content) > MAX_CONTENT):
        errors["content"] = _too_long("BASE_TYPE_MAX_LENGTH", MAX_CONTENT)
    if embeds is not None:
        if not isinstance(embeds, list) or len(embeds) > MAX_EMBEDS:
            errors["embeds"] = _too_long("BASE_TYPE_MAX_LENGTH", MAX_EMBEDS)
        else:
            total = 0
            for i, embed in enumerate(embeds):
                if not isinstance(embed, dict):
                    errors.setdefault("embeds", {})[str(i)] = {
                        "_errors": [
                            {"code": "MODEL_TYPE_CONVERT", "message": "Only dictionaries may be used in a ModelType"}
                        ]
                    }
                    continue
                for name, limit in EMBED_LIMITS.items():
                    value = embed.get(name)
                    total += len(value) if isinstance(value, str) else 0
                    if isinstance(value, str) and len(value) > limit:
                        errors.setdefault("embeds", {}).setdefault(str(i), {})[name] = _too_long(
                            "BASE_TYPE_MAX_LENGTH", limit)  # fmt: skip
            if "embeds" not in errors and total > MAX_EMBED_TOTAL:
                errors["embeds"] = {
                    "_errors": [
                        {
                            "code": "MAX_EMBED_SIZE_EXCEEDED",
                            "message": f"Embed size exceeds maximum size of {MAX_EMBED_TOTAL}",
                        }
                    ]
                }
    username = payload.get("username")
    if username is not None and (not isinstance(username, str) or not 1 <= len(username) <= 80):
        errors["username"] = {"_errors": [{"code": "BASE_TYPE_BAD_LENGTH", "message": "Must be between 1 and 80 "
                                                                                      "in length."}]}  # fmt: skip
    return _form_error(errors) if errors else None


def _card_error(payload: dict) -> str | None:
    """Why Workflows' "post card" would fail on this body, or None when it is a good card message."""
    if payload.get("type") != "message":
        return "The request body's 'type' must be 'message'."
    attachments = payload.get("attachments")
    if not isinstance(attachments, list) or not attachments:
        # The template's foreach over attachments fails on anything but a non-empty array.
        return "The 'foreach' expression '@triggerBody()?['attachments']' is not a valid array."
    for attachment in attachments:
        if not isinstance(attachment, dict) or attachment.get("contentType") != ADAPTIVE:
            return f"Attachment contentType must be '{ADAPTIVE}'."
        card = attachment.get("content")
        if not isinstance(card, dict) or card.get("type") != "AdaptiveCard":
            return "AdaptiveCards.AdaptiveSerializationException: Property 'type' must be 'AdaptiveCard'"
        version = str(card.get("version", ""))
        if not re.fullmatch(r"\d+\.\d+", version) or tuple(map(int, version.split("."))) > MAX_CARD_VERSION:
            return f"The specified Adaptive Card version '{version}' is not supported."
        body = card.get("body", [])
        if not isinstance(body, list) or not all(isinstance(e, dict) and isinstance(e.get("type"), str) for e in body):
            return "AdaptiveCards.AdaptiveSerializationException: every body element needs a 'type'"
    return None


def _handler(state: ChatState):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30

        def log_message(self, *args) -> None:  # keep test output quiet
            return

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            discord = DISCORD_PATH.match(url.path)
            if discord:
                return self._discord(discord.group(1), discord.group(2), query, body)
            teams = TEAMS_PATH.match(url.path)
            if teams:
                return self._teams(teams.group(1), query, body)
            self._json(404, {"message": "404: Not Found", "code": 0})

        def _json_body(self, body: bytes) -> dict | None:
            if self.headers.get("Content-Type", "").split(";")[0].strip().lower() != "application/json":
                return None
            try:
                payload = json.loads(body)
            except ValueError:
                return None
            return payload if isinstance(payload, dict) else None

        def _note(self, kind: str, hook: Hook | None, key: str, status: int, why: str) -> None:
            with state.lock:
                if state.record and status >= 300:
                    state.rejected.append((key, status, why))
            if state.on_post is not None:
                state.on_post(kind, hook.name if hook else "?", status, why)

        # -- Discord

        def _discord(self, hook_id: str, token: str, query: dict, body: bytes) -> None:
            with state.lock:
                hook = state.find("discord", hook_id)
            key = f"/api/webhooks/{hook_id}/{token}"
            if hook is None or hook.removed:
                return self._discord_refuse(hook, key, 404, DISCORD_ERRORS[404])
            if not secrets.compare_digest(token, hook.secret):
                return self._discord_refuse(hook, key, 401, DISCORD_ERRORS[401])
            with state.lock:
                script = _take_script(state, key)
                limited = script is None and self._over_limit(hook_id)
            if limited:
                return self._discord_limited(hook, key, DISCORD_RATE[1])
            if script is not None:
                if script.status == 429:
                    return self._discord_limited(hook, key, script.retry_after or 1.0)
                error = DISCORD_ERRORS.get(script.status, {"message": f"{script.status}: error", "code": 0})
                return self._discord_refuse(hook, key, script.status, error)
            payload = self._json_body(body)
            if payload is None:
                return self._discord_refuse(hook, key, 400, {"message": "The request body contains invalid JSON.",
                                                             "code": 50109})  # fmt: skip
            error = _discord_errors(payload)
            if error is not None:
                return self._discord_refuse(hook, key, 400, error)
            with state.lock:
                state.sequence += 1
                message_id = str(1_300_000_000_000_000_000 + state.sequence)
                if state.record:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    state.received.append(Received("discord", hook.name, key, payload, query, headers, message_id))
            if state.on_post is not None:
                state.on_post("discord", hook.name, 200, str(payload.get("content") or "(embeds)"))
            if query.get("wait", "").lower() != "true":
                return self._send(204, b"", None, self._rate_headers(hook_id))
            self._json(200, _message(hook, message_id, payload), self._rate_headers(hook_id))

        def _over_limit(self, hook_id: str) -> bool:
            """Whether this post goes over Discord's per-webhook limit (under the caller's lock); counts it."""
            if not state.enforce_rate:
                return False
            limit, per = DISCORD_RATE
            recent = state.recent.setdefault(hook_id, deque())
            now = time.monotonic()
            while recent and now - recent[0] >= per:
                recent.popleft()
            if len(recent) >= limit:
                return True
            recent.append(now)
            return False

        def _rate_headers(self, hook_id: str, remaining: int | None = None) -> dict:
            limit, per = DISCORD_RATE
            with state.lock:
                recent = state.recent.get(hook_id, deque())
                used = len(recent)
                reset_after = max(0.0, per - (time.monotonic() - recent[0])) if recent else per
            return {
                "X-RateLimit-Limit": str(limit),
                "X-RateLimit-Remaining": str(max(0, limit - used) if remaining is None else remaining),
                "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
                "X-RateLimit-Reset-After": f"{reset_after:.3f}",
                "X-RateLimit-Bucket": hashlib.sha256(f"webhook:{hook_id}".encode()).hexdigest()[:32],
            }

        def _discord_limited(self, hook: Hook, key: str, retry_after: float) -> None:
            self._note("discord", hook, key, 429, "rate limited")
            headers = self._rate_headers(hook.id, remaining=0) | {
                "Retry-After": str(math.ceil(retry_after)),
                "X-RateLimit-Reset-After": f"{retry_after:.3f}",
                "X-RateLimit-Scope": "shared",  # a per-webhook (resource) limit, not the bot's or the global one
            }
            body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": False}
            self._json(429, body, headers)

        def _discord_refuse(self, hook: Hook | None, key: str, status: int, error: dict) -> None:
            self._note("discord", hook, key, status, str(error.get("message")))
            self._json(status, error, self._rate_headers(hook.id) if hook else None)

        # -- Teams Workflows

        def _teams(self, flow_id: str, query: dict, body: bytes) -> None:
            with state.lock:
                hook = state.find("teams", flow_id)
            key = f"/workflows/{flow_id}"
            if hook is None or hook.removed:
                return self._teams_refuse(hook, key, 404, f"The workflow '{flow_id}' could not be found.")
            if not secrets.compare_digest(query.get("sig", ""), hook.secret):
                return self._teams_refuse(hook, key, 401, "The provided authorization signature is not valid.")
            with state.lock:
                script = _take_script(state, key)
            if script is not None:
                headers = {"Retry-After": str(math.ceil(script.retry_after or 1))} if script.status == 429 else {}
                return self._teams_refuse(hook, key, script.status, f"Scripted answer {script.status}.", headers)
            payload = self._json_body(body)
            if payload is None:
                content_type = self.headers.get("Content-Type", "") or "application/octet-stream"
                return self._teams_refuse(
                    hook,
                    key,
                    400,
                    "The input body for trigger 'manual' of type 'Request' must "
                    f"be of type JSON, but was of type '{content_type}'.",
                )
            why = _card_error(payload)
            if why is not None and state.strict_cards:
                return self._teams_refuse(hook, key, 400, why, code="TriggerInputSchemaMismatch")
            run_id = f"08584{secrets.randbelow(10**15):015d}CU{secrets.randbelow(100):02d}"
            with state.lock:
                if why is not None:
                    state.failed_runs.append((key, why))
                elif state.record:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    state.received.append(Received("teams", hook.name, key, payload, query, headers))
            if state.on_post is not None:
                state.on_post("teams", hook.name, 202, why or "card accepted")
            self._send(202, b"", None, {"x-ms-workflow-run-id": run_id, "x-ms-workflow-id": flow_id,
                                        "x-ms-request-id": str(uuid.uuid4())})  # fmt: skip

        def _teams_refuse(self, hook: Hook | None, key: str, status: int, message: str, headers: dict | None = None,
                          code: str | None = None) -> None:  # fmt: skip
            self._note("teams", hook, key, status, message)
            code = code or TEAMS_ERRORS.get(status, "Error")
            self._json(status, {"error": {"code": code, "message": message}}, headers)

        # -- answers

        def _json(self, status: int, body: dict, headers: dict | None = None) -> None:
            self._send(status, json.dumps(body).encode(), "application/json; charset=utf-8", headers)

        def _send(self, status: int, raw: bytes, content_type: str | None, headers: dict | None) -> None:
            self.send_response(status)
            if content_type:
                self.send_header("Content-Type", content_type)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


def _message(hook: Hook, message_id: str, payload: dict) -> dict:
    """The message object Discord answers an execute-webhook with ?wait=true."""
    return {
        "id": message_id,
        "type": 0,
        "content": payload.get("content") or "",
        "channel_id": "1100000000000000001",
        "author": {
            "id": hook.id,
            "username": payload.get("username") or hook.name,
            "avatar": None,
            "discriminator": "0000",
            "bot": True,
        },  # fmt: skip
        "attachments": [],
        "embeds": [dict(e, type="rich") for e in payload.get("embeds") or []],
        "mentions": [],
        "mention_roles": [],
        "pinned": False,
        "mention_everyone": False,
        "tts": bool(payload.get("tts", False)),
        "timestamp": datetime.now(UTC).isoformat(),
        "edited_timestamp": None,
        "flags": int(payload.get("flags", 0) or 0),
        "components": [],
        "webhook_id": hook.id,
    }


@pytest.fixture
def chat_webhooks_server():
    """A local Discord webhook and Teams Workflows trigger over TLS; see the module docstring."""
    with ChatWebhooksServer() as server:
        yield server


# Running on its own (`make run`).

HOOKS_FILE = "hooks.json"


def main(argv: list[str] | None = None) -> int:
    """Serve a stand-in until SIGTERM or Ctrl-C, its CA, certificate and webhooks kept in --dir with settings.json."""
    found = standalone.parser("tests.support.chat_webhooks_server", "A local Discord webhook and Teams Workflows "
                              "trigger, over TLS.", "the CA, the certificate, the webhooks")  # fmt: skip
    found.add_argument("--enforce-rate", action="store_true", help="Discord's 5 posts per 2 s per webhook")
    args = found.parse_args(argv)
    where = standalone.directory(args)
    hooks_file = where / HOOKS_FILE
    kept = json.loads(hooks_file.read_text()) if hooks_file.exists() else []

    def tell(kind: str, name: str, status: int, what: str) -> None:
        print(f"{status} {kind} {name}: {what[:80]!r}", flush=True)

    with ChatWebhooksServer(args.port, where, args.host, args.enforce_rate) as server:
        server.state.record = False
        server.state.on_post = None if args.quiet else tell
        for hook in kept:
            server.state.hooks[(hook["kind"], hook["name"])] = Hook(**hook)
        settings = server.settings()  # first: it makes the default webhooks, which the hooks file then keeps
        standalone.write_json(hooks_file, [asdict(h) for h in server.state.hooks.values()])
        hooks_file.chmod(0o600)
        standalone.serve(where, settings, f"Discord/Teams stand-in on {server.origin}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
