"""A local FCM for tests: Google's OAuth token endpoint and FCM's HTTP v1 send endpoint, over real TLS.

FcmServer runs a threaded HTTPS server (HTTP/1.1 with keep-alive) on 127.0.0.1 whose certificate comes
from a trustme CA; `ca_path` is that CA's PEM, for FCM_CA_FILE. `service_account(directory)` writes a
service-account key with a fresh RSA key and token_uri pointing here, and makes the server know its
public key; `settings(path)` gives the FCM_* settings that reach this server with it.

POST /token (RFC 7523, as Google's): grant_type urn:ietf:params:oauth:grant-type:jwt-bearer and an
RS256 assertion whose signature verifies with a known key (kid = private_key_id), iss = client_email,
aud = https://oauth2.googleapis.com/token (what Google requires, whatever the key's token_uri), a scope
with firebase.messaging, iat/exp within the hour. Answers {"access_token", "expires_in": token_lifetime,
"token_type": "Bearer"}, or 400 {"error": "invalid_grant"…} like Google. `tokens_issued` counts them;
`revoke_tokens()` forgets every one; `token_answer = (status, body)` makes the endpoint answer that.

POST /v1/projects/<project_id>/messages:send: the bearer token must be one issued here, unexpired, for
that project (401 UNAUTHENTICATED / 403 PERMISSION_DENIED otherwise); the body is validated (one token,
string data values, android priority/ttl/collapse_key, known fields; a failure is a 400 with a
google.rpc.BadRequest and is listed in `rejected`); accepted messages are in `received` and answered
{"name": "projects/<p>/messages/<id>"}. `script(token, error, retry_after=, delay=, times=)` makes one
device's sends answer with one of ERRORS (or only wait), as FCM would.

Run on its own (`make run` does), it serves until SIGTERM or Ctrl-C on a port of your choice, keeping its
CA, certificate and service-account key in a directory across restarts and writing the FCM_* settings that
reach it there:

    python -m tests.support.fcm_server --port 2198 --dir var/fcm      # then read var/fcm/settings.json
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import jwt
import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support import standalone

GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
SCOPES = {"https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform"}
FCM_ERROR = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
SEND_PATH = re.compile(r"^/v1/projects/([^/]+)/messages:send$")
TTL = re.compile(r"^\d+(\.\d{1,9})?s$")
MAX_TTL_SECONDS = 28 * 86_400
MAX_PAYLOAD_BYTES = 4096
SHORT_LIVED = (
    "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. "
    "Check your iat and exp values in the JWT claim."
)


def _fcm_error(code: str) -> dict:
    return {"@type": FCM_ERROR, "errorCode": code}


def _bad_request(*violations: tuple[str, str]) -> dict:
    return {"@type": BAD_REQUEST, "fieldViolations": [{"field": f, "description": d} for f, d in violations]}


INVALID = "Request contains an invalid argument."
# What FCM answers, by name: (HTTP status, google.rpc status, message, details). The shapes are FCM's own
# (firebase.google.com/docs/cloud-messaging/error-codes and the ErrorCode reference).
ERRORS: dict[str, tuple[int, str, str, list]] = {
    "UNREGISTERED": (404, "NOT_FOUND", "Requested entity was not found.", [_fcm_error("UNREGISTERED")]),
    # A malformed token, as FCM's documentation shows it, and as the Admin SDKs see it (a BadRequest on the field).
    "INVALID_TOKEN": (400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token",
                      [_fcm_error("INVALID_ARGUMENT")]),
    "INVALID_TOKEN_FIELD": (400, "INVALID_ARGUMENT", INVALID,
                            [_fcm_error("INVALID_ARGUMENT"), _bad_request(("message.token", "Invalid token"))]),
    # Any other invalid argument (a payload too big, a wrong package name…).
    "INVALID_ARGUMENT": (400, "INVALID_ARGUMENT", INVALID, [_fcm_error("INVALID_ARGUMENT")]),
    "QUOTA_EXCEEDED": (429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Send requests'.",
                       [_fcm_error("QUOTA_EXCEEDED")]),
    "UNAVAILABLE": (503, "UNAVAILABLE", "The service is currently unavailable.", [_fcm_error("UNAVAILABLE")]),
    "INTERNAL": (500, "INTERNAL", "Internal error encountered.", [_fcm_error("INTERNAL")]),
    "SENDER_ID_MISMATCH": (403, "PERMISSION_DENIED", "SenderId mismatch", [_fcm_error("SENDER_ID_MISMATCH")]),
    "THIRD_PARTY_AUTH_ERROR": (401, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service",
                               [_fcm_error("THIRD_PARTY_AUTH_ERROR")]),
    "UNAUTHENTICATED": (401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 "
                        "access token, login cookie or other valid authentication credential.", []),
}  # fmt: skip


@dataclass
class Account:
    """A service account the token endpoint knows."""

    email: str
    project_id: str
    key_id: str
    public_key: rsa.RSAPublicKey


@dataclass
class Script:
    """How one device's sends are answered: an error of ERRORS (None: accepted), after delay seconds."""

    error: str | None = None
    retry_after: str | None = None
    delay: float = 0.0
    times: int | None = None  # None: every send; else this many, then normal answers


@dataclass
class Received:
    """One accepted send."""

    project_id: str
    token: str
    message: dict
    headers: dict
    name: str


@dataclass
class FcmState:
    """The stand-in's accounts, tokens, scripts and what it received (read by tests, under lock)."""

    origin: str = ""
    token_lifetime: int = 3600
    token_answer: tuple[int, dict] | None = None
    accounts: dict[str, Account] = field(default_factory=dict)
    tokens: dict[str, tuple[float, Account]] = field(default_factory=dict)  # access token -> (expires at, account)
    tokens_issued: int = 0
    assertions: list[dict] = field(default_factory=list)  # the verified claims of each token request
    scripts: dict[str, Script] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    answered: list[tuple[str, int]] = field(default_factory=list)  # (device token, status) of every send
    connections: set = field(default_factory=set)  # client (address, port) pairs that sent a request
    in_flight: int = 0
    peak_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    # A long-running stand-in (main()) keeps no lists of what it received: on_send hears of each send instead.
    record: bool = True
    on_send: Callable[[str, int, str], None] | None = None  # (device token, status, the alert's title or error)
    sent: int = 0


class FcmServer:
    """The stand-in: `with FcmServer() as fcm:` serves until the block ends."""

    # port 0: a free one. directory: where its CA and certificate are kept and reused (a long-running
    # stand-in's, whose settings must stay valid across restarts); None: a temporary one, removed at the end.
    def __init__(self, port: int = 0, directory: Path | str | None = None, host: str = "127.0.0.1") -> None:
        self.state = FcmState()
        self._own_dir = directory is None
        self._dir = Path(tempfile.mkdtemp(prefix="hato-fcm-")) if directory is None else Path(directory)
        self.ca_path = str(self._dir / "ca.pem")
        cert_file, cert_key = self._dir / "cert.pem", self._dir / "cert.key"
        if self._own_dir or not all(path.exists() for path in (Path(self.ca_path), cert_file, cert_key)):
            self._ca = trustme.CA()
            cert = self._ca.issue_cert(*dict.fromkeys(("127.0.0.1", "localhost", host)))
            self._ca.cert_pem.write_to_path(self.ca_path)
            cert.private_key_pem.write_to_path(str(cert_key))
            for i, pem in enumerate(cert.cert_chain_pems):
                pem.write_to_path(str(cert_file), append=i > 0)
            cert_key.chmod(0o600)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(cert_file), str(cert_key))
        self.httpd = _TlsServer((host, port), _handler(self.state), context)
        self.state.origin = f"https://{host}:{self.httpd.server_address[1]}"
        # A short poll: shutdown() waits for one, at the end of every test.
        serve = functools.partial(self.httpd.serve_forever, poll_interval=0.05)
        self._thread = threading.Thread(target=serve, name="fcm-stand-in", daemon=True)

    # -- running

    def __enter__(self) -> FcmServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._own_dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    @property
    def origin(self) -> str:
        return self.state.origin

    @property
    def token_uri(self) -> str:
        return f"{self.state.origin}/token"

    # -- accounts and settings

    def service_account(self, directory: Path | str | None = None, project_id: str = "hato-test",
                        known: bool = True, name: str | None = None) -> str:  # fmt: skip
        """Write a service-account key file (a fresh RSA key, token_uri here) and return its path.

        known=False: the token endpoint has never heard of it (its assertions are refused, invalid_grant).
        name: the file's name in directory (default <project_id>-<key id>.json).
        """
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        key_id = os.urandom(20).hex()
        serial = int.from_bytes(os.urandom(8), "big")
        email = f"firebase-adminsdk-{key_id[:5]}@{project_id}.iam.gserviceaccount.com"
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        info = {
            "type": "service_account",
            "project_id": project_id,
            "private_key_id": key_id,
            "private_key": pem,
            "client_email": email,
            "client_id": str(serial),
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": self.token_uri,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": f"https://www.googleapis.com/robot/v1/metadata/x509/{email}",
            "universe_domain": "googleapis.com",
        }
        if known:
            with self.state.lock:
                self.state.accounts[email] = Account(email, project_id, key_id, key.public_key())
        path = Path(directory or self._dir) / (name or f"{project_id}-{key_id[:12]}.json")
        path.write_text(json.dumps(info, indent=2))
        path.chmod(0o600)
        return str(path)

    def adopt_service_account(self, path: Path | str) -> str:
        """Know the key file service_account() wrote in an earlier run (token_uri made to point here); its path."""
        path = Path(path)
        info = json.loads(path.read_text())
        key = serialization.load_pem_private_key(info["private_key"].encode(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError(f"{path}: not an RSA key")
        if info.get("token_uri") != self.token_uri:
            info["token_uri"] = self.token_uri
            path.write_text(json.dumps(info, indent=2))
        account = Account(info["client_email"], info["project_id"], info["private_key_id"], key.public_key())
        with self.state.lock:
            self.state.accounts[account.email] = account
        return str(path)

    def settings(self, credentials_file: str, **overrides) -> dict:
        """The FCM_* settings (and what the provider reads beside them) that send here with that key."""
        return {
            "FCM_CREDENTIALS_FILE": credentials_file,
            "FCM_API_BASE": self.origin,
            "FCM_CA_FILE": self.ca_path,
            "FCM_CONCURRENCY": 20,
            "FCM_TIMEOUT": 5.0,
            "RETRY_CAP_SECONDS": 600.0,
            "DELIVERY_LEASE_SECONDS": 120,
            "LEASE_MARGIN_SECONDS": 5.0,
            **overrides,
        }

    # -- scripting

    def script(self, token: str, error: str | None = None, *, retry_after: str | None = None, delay: float = 0.0,
               times: int | None = None) -> None:  # fmt: skip
        """Answer token's sends with ERRORS[error] (None: accept), after delay s, `times` times (None: always)."""
        if error is not None and error not in ERRORS:
            raise KeyError(f"unknown FCM error {error!r}; known: {', '.join(ERRORS)}")
        with self.state.lock:
            self.state.scripts[token] = Script(error, retry_after, delay, times)

    def revoke_tokens(self) -> None:
        """Forget every access token issued so far (their next use is a 401 UNAUTHENTICATED)."""
        with self.state.lock:
            self.state.tokens.clear()

    # -- reading

    @property
    def tokens_issued(self) -> int:
        return self.state.tokens_issued

    @property
    def received(self) -> list[Received]:
        with self.state.lock:
            return list(self.state.received)

    @property
    def rejected(self) -> list[str]:
        with self.state.lock:
            return list(self.state.rejected)

    def received_by(self, token: str) -> list[Received]:
        """The accepted sends to one device."""
        return [r for r in self.received if r.token == token]


class _TlsServer(ThreadingHTTPServer):
    """ThreadingHTTPServer whose connections are TLS, the handshake made in each connection's own thread."""

    daemon_threads = True

    def __init__(self, address, handler, context: ssl.SSLContext) -> None:
        self.context = context
        super().__init__(address, handler)

    def finish_request(self, request, client_address) -> None:
        try:
            connection = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):  # a client that gave up on the handshake
            return
        try:
            super().finish_request(connection, client_address)
        finally:
            connection.close()

    def handle_error(self, request, client_address) -> None:  # a client that hung up mid-request: not news
        return


def _handler(state: FcmState):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as FCM's front ends
        timeout = 30  # an idle kept-alive connection's thread ends after this

        def log_message(self, *args) -> None:  # keep test output quiet
            return

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with state.lock:
                state.connections.add(self.client_address)
            if self.path == "/token":
                return self._token(body)
            match = SEND_PATH.match(self.path)
            if match is None:
                return self._json(404, _google_error(404, "NOT_FOUND", f"no such method: {self.path}"))
            with state.lock:
                state.in_flight += 1
                state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
            try:
                self._send(match.group(1), body)
            finally:
                with state.lock:
                    state.in_flight -= 1

        # -- the token endpoint

        def _token(self, body: bytes) -> None:
            if state.token_answer is not None:
                return self._json(*state.token_answer)
            if self.headers.get("Content-Type", "").split(";")[0] != "application/x-www-form-urlencoded":
                return self._json(400, {"error": "invalid_request", "error_description": "Bad Request"})
            form = parse_qs(body.decode("ascii", "replace"), strict_parsing=False)
            grant = form.get("grant_type", [""])
            if grant != [JWT_BEARER]:
                refusal = {"error": "unsupported_grant_type", "error_description": f"Invalid grant_type: {grant}"}
                return self._json(400, refusal)
            assertion = form.get("assertion", [""])
            try:
                claims, account = _verify_assertion(state, assertion[0] if len(assertion) == 1 else "")
            except _Refused as exc:
                return self._json(400, {"error": exc.error, "error_description": str(exc)})
            access = f"ya29.{os.urandom(24).hex()}"
            with state.lock:
                state.tokens[access] = (time.time() + state.token_lifetime, account)
                state.tokens_issued += 1
                state.assertions.append(claims)
                lifetime = state.token_lifetime
            self._json(200, {"access_token": access, "expires_in": lifetime, "token_type": "Bearer"})

        # -- the send endpoint

        def _send(self, project_id: str, body: bytes) -> None:
            scheme, _, bearer = self.headers.get("Authorization", "").partition(" ")
            with state.lock:
                issued = state.tokens.get(bearer) if scheme == "Bearer" else None
            if issued is None or issued[0] <= time.time():
                return self._json(401, _google_error(*ERRORS["UNAUTHENTICATED"][:3]))
            if issued[1].project_id != project_id:
                resource = f"//cloudresourcemanager.googleapis.com/projects/{project_id}"
                text = f"Permission 'cloudmessaging.messages.create' denied on resource '{resource}'."
                return self._json(403, _google_error(403, "PERMISSION_DENIED", text))
            try:
                payload = json.loads(body)
            except ValueError:
                payload = None
            violations = _violations(payload)
            if violations:
                with state.lock:
                    state.rejected.append("; ".join(f"{f}: {d}" for f, d in violations))
                return self._json(400, _google_error(400, "INVALID_ARGUMENT", violations[0][1],
                                                     [_bad_request(*violations)]))  # fmt: skip
            message = payload["message"]
            token = message["token"]
            with state.lock:
                script = state.scripts.get(token)
                if script is not None and script.times is not None:
                    script.times -= 1
                    if script.times <= 0:
                        del state.scripts[token]
            if script is not None and script.delay:
                time.sleep(script.delay)
            if script is not None and script.error is not None:
                status, google_status, text, details = ERRORS[script.error]
                headers = {"Retry-After": script.retry_after} if script.retry_after is not None else {}
                with state.lock:
                    if state.record:
                        state.answered.append((token, status))
                if state.on_send is not None:
                    state.on_send(token, status, script.error)
                return self._json(status, _google_error(status, google_status, text, details), headers)
            with state.lock:
                state.sent += 1
                name = f"projects/{project_id}/messages/0:{state.sent}%{os.urandom(8).hex()}"
                if state.record:
                    state.received.append(Received(project_id, token, message,
                                                   {k.lower(): v for k, v in self.headers.items()}, name))  # fmt: skip
                    state.answered.append((token, 200))
            if state.on_send is not None:
                state.on_send(token, 200, str(message.get("notification", {}).get("title", "")))
            self._json(200, {"name": name})

        def _json(self, status: int, body: dict, headers: dict | None = None) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


class _Refused(Exception):
    """The token endpoint refuses the assertion; error is the OAuth error code."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error


def _verify_assertion(state: FcmState, assertion: str) -> tuple[dict, Account]:
    """Google's checks of a service account's JWT assertion; the claims and the account, or _Refused."""
    try:
        header = jwt.get_unverified_header(assertion)
        unverified = jwt.decode(assertion, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise _Refused("invalid_grant", f"Invalid JWT: {exc}") from exc
    with state.lock:
        account = state.accounts.get(str(unverified.get("iss")))
    if account is None:
        raise _Refused("invalid_grant", "Invalid grant: account not found")
    if header.get("alg") != "RS256" or header.get("kid") != account.key_id:
        raise _Refused("invalid_grant", "Invalid JWT Signature.")
    try:
        claims = jwt.decode(assertion, account.public_key, algorithms=["RS256"], audience=GOOGLE_TOKEN_AUDIENCE,
                            issuer=account.email, options={"require": ["iss", "aud", "exp", "iat"]})  # fmt: skip
    except jwt.InvalidSignatureError as exc:
        raise _Refused("invalid_grant", "Invalid JWT Signature.") from exc
    except jwt.PyJWTError as exc:
        raise _Refused("invalid_grant", f"Invalid JWT: {exc}") from exc
    now = time.time()
    if not (claims["iat"] <= now + 60 and now < claims["exp"] and claims["exp"] - claims["iat"] <= 3600):
        raise _Refused("invalid_grant", SHORT_LIVED)
    if not SCOPES & set(str(claims.get("scope", "")).split()):
        raise _Refused("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
    return claims, account


def _google_error(code: int, status: str, message: str, details: list | None = None) -> dict:
    error = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = details
    return {"error": error}


MESSAGE_FIELDS = {"name", "data", "notification", "android", "webpush", "apns", "fcm_options", "token", "topic",
                  "condition"}  # fmt: skip
NOTIFICATION_FIELDS = {"title", "body", "image"}
ANDROID_FIELDS = {"collapse_key", "priority", "ttl", "restricted_package_name", "data", "notification", "fcm_options",
                  "direct_boot_ok"}  # fmt: skip
RESERVED_DATA_KEYS = {"from", "notification", "message_type"}


def _violations(payload) -> list[tuple[str, str]]:
    """What FCM would refuse in a send body: [(field, description)], empty when it is fine."""
    if not isinstance(payload, dict) or set(payload) - {"message", "validate_only"}:
        return [("", "Invalid JSON payload received.")]
    message = payload.get("message")
    if not isinstance(message, dict):
        return [("message", "Invalid JSON payload received: message is not an object.")]
    found = [(f"message.{k}", f"Invalid JSON payload received. Unknown name \"{k}\" at 'message': Cannot find field.")
             for k in set(message) - MESSAGE_FIELDS]  # fmt: skip
    targets = [k for k in ("token", "topic", "condition") if k in message]
    if targets != ["token"] or not isinstance(message["token"], str) or not message["token"]:
        found.append(("message", "Recipient of the message is not set." if not targets else "Exactly one target"))
    data = message.get("data", {})
    if not isinstance(data, dict):
        found.append(("message.data", "Invalid value at 'message.data': not a map"))
        data = {}
    for index, (key, value) in enumerate(data.items()):
        if not isinstance(value, str):
            found.append((f"message.data[{index}].value", f"Invalid value at 'message.data[{index}].value' "
                                                          f"(TYPE_STRING), {value!r}"))  # fmt: skip
        if key in RESERVED_DATA_KEYS or key.startswith(("google", "gcm")):
            found.append((f"message.data[{index}].key", f"Invalid data key: {key}"))
    notification = message.get("notification", {})
    if (
        not isinstance(notification, dict)
        or set(notification) - NOTIFICATION_FIELDS
        or not all(isinstance(v, str) for v in notification.values())
    ):
        found.append(("message.notification", "Invalid value at 'message.notification'"))
        notification = {}
    android = message.get("android", {})
    if not isinstance(android, dict):
        return [*found, ("message.android", "Invalid value at 'message.android'")]
    for key in set(android) - ANDROID_FIELDS:
        found.append((f"message.android.{key}", f"Unknown name \"{key}\" at 'message.android': Cannot find field."))
    if "priority" in android and android["priority"] not in ("NORMAL", "HIGH"):
        found.append(("message.android.priority", f"Invalid value at 'message.android.priority' "
                                                  f"(type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority),"
                                                  f" {android['priority']!r}"))  # fmt: skip
    ttl = android.get("ttl", "0s")
    if not isinstance(ttl, str) or not TTL.match(ttl) or float(ttl[:-1]) > MAX_TTL_SECONDS:
        found.append(("message.android.ttl", f"Invalid value at 'message.android.ttl' (type.googleapis.com/"
                                             f"google.protobuf.Duration), {ttl!r}"))  # fmt: skip
    for key in ("collapse_key", "restricted_package_name"):
        if key in android and not isinstance(android[key], str):
            found.append((f"message.android.{key}", f"Invalid value at 'message.android.{key}' (TYPE_STRING)"))
    size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in (*data.items(), *notification.items()))
    if size > MAX_PAYLOAD_BYTES:
        found.append(("message", "Message is too big"))
    return found


@pytest.fixture
def fcm_server():
    """A local FCM (token endpoint and send endpoint) over TLS; see the module docstring."""
    from app.providers.fcm_transport import close_transports

    with FcmServer() as server:
        yield server
        close_transports()  # the provider's kept-alive connections to this server end with it


# Running on its own (`make run`, benchmarks).

KEY_FILE = "service-account.json"
CLIENT_SETTINGS = ("FCM_CREDENTIALS_FILE", "FCM_API_BASE", "FCM_CA_FILE")


def client_settings(server: FcmServer, credentials_file: str) -> dict[str, str]:
    """The FCM_* settings an app needs to send to server with that key (as environment values)."""
    return {k: str(v) for k, v in server.settings(credentials_file).items() if k in CLIENT_SETTINGS}


def main(argv: list[str] | None = None) -> int:
    """Serve a stand-in until SIGTERM or Ctrl-C, its CA, certificate and key kept in --dir with settings.json."""
    found = standalone.parser("tests.support.fcm_server", "A local FCM for development: Google's OAuth token "
                              "endpoint and FCM's HTTP v1 send, over TLS.",
                              "the CA, the certificate, the service-account key")  # fmt: skip
    found.add_argument("--project", default="hato-test", help="the Firebase project id of a new key")
    args = found.parse_args(argv)
    where = standalone.directory(args)

    def tell(token: str, status: int, what: str) -> None:
        # The token's last 8 characters only: it is the phone's secret.
        print(f"{status} {'send' if status == 200 else 'refused'} to …{token[-8:]}: {what!r}", flush=True)

    with FcmServer(args.port, where, args.host) as server:
        server.state.record = False
        server.state.on_send = None if args.quiet else tell
        key = where / KEY_FILE
        if key.exists():
            credentials = server.adopt_service_account(key)
        else:
            credentials = server.service_account(where, args.project, name=KEY_FILE)
        project = json.loads(key.read_text())["project_id"]
        standalone.serve(where, client_settings(server, credentials), f"FCM stand-in on {server.origin} "
                         f"(project {project})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
