"""A local APNs for tests: Apple's provider API over real TLS and HTTP/2, its token auth checked as Apple does.

hypercorn serves a small ASGI app on 127.0.0.1 in a thread of its own, with a server certificate from a
trustme CA (`ca_file`: what APNS_CA_FILE points at) and h2 as the only ALPN protocol (an HTTP/1.1
request gets 505). Every `POST /3/device/<hex token>` is checked like APNs does: the bearer JWT's
ES256 signature against the test team's .p8 key (`make_key`), its kid, iss and age (older than an hour:
403 ExpiredProviderToken); apns-topic, apns-push-type, apns-priority, apns-expiration, the collapse
id's 64 bytes, and a JSON body with an aps dictionary of at most 4096 bytes (413 PayloadTooLarge).
An accepted push is recorded in `received` (Push: token, headers, payload, the JWT) and answered 200
with a fresh apns-id; a refusal is recorded in `refused`. `script(token, *answers)` makes the next
requests for a token answer otherwise (Answer: 410 Unregistered with a timestamp, 400 BadDeviceToken,
429, 500, 503 with Retry-After, a delay, or expire the JWT in use). `connections` and `max_streams`
say how many TCP connections were opened and how many requests were in flight at once.

Run on its own (`make run` does), it serves until SIGTERM or Ctrl-C on a port of your choice, keeping its
key and certificates in a directory across restarts and writing the APNS_* settings that reach it there:

    python -m tests.support.apns_server --port 2197 --dir var/apns     # then read var/apns/settings.json
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import jwt
import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypercorn.asyncio import serve
from hypercorn.config import Config

from tests.support import standalone
from tests.support.waiting import free_port, wait_for

TEAM_ID = "TEAM123456"
KEY_ID = "KEY1234567"
TOPIC = "org.hato.test"
PAYLOAD_LIMIT = 4096
COLLAPSE_ID_LIMIT = 64
TOKEN_MAX_AGE = 3600  # Apple refuses a provider token issued more than an hour ago
PATH = re.compile(r"^/3/device/(?P<token>[^/]*)$")
HEX = re.compile(r"^[0-9a-fA-F]{8,200}$")
PUSH_TYPES = {"alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity"}


def make_key(path: Path) -> ec.EllipticCurvePrivateKey:
    """Write a new EC P-256 key to path as Apple's .p8 files are (unencrypted PKCS#8 PEM); return it."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    Path(path).write_bytes(pem)
    return key


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path} is not an EC key")
    return key


def device_token() -> str:
    """A token shaped like an iPhone's: 32 random bytes in hex."""
    return uuid.uuid4().hex + uuid.uuid4().hex


@dataclass(frozen=True)
class Answer:
    """How the stand-in answers one request for a scripted token (status 200: accept it, after delay)."""

    status: int = 200
    reason: str = ""
    timestamp_ms: int | None = None  # 410 only: when the token stopped being valid
    retry_after: str | None = None
    delay: float = 0.0
    expire_jwt: bool = False  # the JWT of this request (and only it) becomes expired: 403 ExpiredProviderToken

    @classmethod
    def unregistered(cls, timestamp_ms: int) -> Answer:
        return cls(410, "Unregistered", timestamp_ms=timestamp_ms)

    @classmethod
    def bad_device_token(cls) -> Answer:
        return cls(400, "BadDeviceToken")

    @classmethod
    def not_for_topic(cls) -> Answer:
        return cls(400, "DeviceTokenNotForTopic")

    @classmethod
    def too_many(cls, retry_after: str | None = None) -> Answer:
        return cls(429, "TooManyRequests", retry_after=retry_after)

    @classmethod
    def unavailable(cls, retry_after: str | None = None) -> Answer:
        return cls(503, "ServiceUnavailable", retry_after=retry_after)

    @classmethod
    def internal_error(cls) -> Answer:
        return cls(500, "InternalServerError")

    @classmethod
    def slow(cls, seconds: float) -> Answer:
        return cls(delay=seconds)

    @classmethod
    def expired_jwt(cls) -> Answer:
        return cls(expire_jwt=True)


@dataclass(frozen=True)
class Push:
    """One accepted notification request."""

    token: str
    headers: dict[str, str]
    payload: dict
    jwt: str
    apns_id: str
    client: tuple  # (host, port) of the TCP connection it came on


@dataclass
class Refusal:
    """One refused request: its token, status and Apple's reason."""

    token: str
    status: int
    reason: str


class Refused(Exception):
    """The request is refused with status and reason."""

    def __init__(self, status: int, reason: str, **extra) -> None:
        super().__init__(reason)
        self.status, self.reason, self.extra = status, reason, extra


class _Loop(asyncio.SelectorEventLoop):
    """An event loop whose TLS connections close at once when the stand-in stops.

    asyncio waits up to 30 s for the peer's close_notify; an httpx client that is not reading never
    sends it, so a stop would wait that long for every connection a provider keeps open.
    """

    async def create_server(self, *args, **kwargs):
        if kwargs.get("ssl") is not None:
            kwargs.setdefault("ssl_shutdown_timeout", 0.2)
        return await super().create_server(*args, **kwargs)


@dataclass
class ApnsServer:
    """The stand-in and its records; start() it (or use it as a context manager), stop() when done."""

    directory: Path
    team_id: str = TEAM_ID
    key_id: str = KEY_ID
    topics: tuple[str, ...] = (TOPIC,)
    max_concurrent_streams: int = 100
    received: list[Push] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    connections: set[tuple] = field(default_factory=set)
    jwts: list[str] = field(default_factory=list)  # each distinct JWT seen, in order
    in_flight: int = 0
    max_streams: int = 0
    port: int = 0  # 0: a free one
    host: str = "127.0.0.1"
    # A long-running stand-in (main()): reuse the key and certificates already in directory, so the settings
    # a running app holds stay valid across restarts; record nothing (on_answer hears of each request instead).
    keep: bool = False
    record: bool = True
    on_answer: Callable[[Push | Refusal], None] | None = None

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        self.key_file = self.directory / f"AuthKey_{self.key_id}.p8"
        self.ca_file = self.directory / "apns-ca.pem"
        self._cert_file, self._cert_key = self.directory / "apns-cert.pem", self.directory / "apns-cert.key"
        kept = (self.key_file, self.ca_file, self._cert_file, self._cert_key)
        if self.keep and all(path.exists() for path in kept):
            self.public_key = _load_key(self.key_file).public_key()
        else:
            self.public_key = make_key(self.key_file).public_key()
            ca = trustme.CA()
            cert = ca.issue_cert(*dict.fromkeys(("localhost", "127.0.0.1", self.host)))
            ca.cert_pem.write_to_path(str(self.ca_file))
            cert.private_key_pem.write_to_path(str(self._cert_key))
            for i, pem in enumerate(cert.cert_chain_pems):
                pem.write_to_path(str(self._cert_file), append=i > 0)
        for secret in (self.key_file, self._cert_key):
            secret.chmod(0o600)
        self.port = self.port or free_port()
        self.url = f"https://{'localhost' if self.host == '127.0.0.1' else self.host}:{self.port}"
        self._scripts: dict[str, deque[Answer]] = defaultdict(deque)
        self._expired: set[str] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def settings(self, **overrides) -> dict:
        """The APNS_* settings that point a provider at this stand-in."""
        return {
            "APNS_KEY_FILE": str(self.key_file),
            "APNS_KEY_ID": self.key_id,
            "APNS_TEAM_ID": self.team_id,
            "APNS_TOPIC": self.topics[0],
            "APNS_ENDPOINT": self.url,
            "APNS_CA_FILE": str(self.ca_file),
            "APNS_CONCURRENCY": 20,
            "APNS_TIMEOUT": 5.0,
            "RETRY_CAP_SECONDS": 600.0,
            **overrides,
        }

    def script(self, token: str, *answers: Answer) -> None:
        """The next requests for token get these answers, one each, in order; then 200 again."""
        with self._lock:
            self._scripts[token].extend(answers)

    def expire_jwt(self) -> None:
        """Every JWT seen so far is expired from now on (as if an hour had passed)."""
        with self._lock:
            self._expired.update(self.jwts)

    def tokens_received(self) -> list[str]:
        """The device tokens of the accepted pushes, in order."""
        return [push.token for push in self.received]

    # The server's life.

    def start(self) -> ApnsServer:
        """Serve in a thread of its own; return once it accepts connections."""
        config = Config()
        config.bind = [f"{self.host}:{self.port}"]
        config.certfile, config.keyfile = str(self._cert_file), str(self._cert_key)
        config.alpn_protocols = ["h2"]  # APNs speaks HTTP/2 only
        config.h2_max_concurrent_streams = self.max_concurrent_streams
        config.keep_alive_timeout = 600  # APNs keeps idle connections open a long time; reconnects would hide reuse
        config.keep_alive_max_requests = 10**9
        config.graceful_timeout = 0.2
        config.accesslog = None
        config.loglevel = "WARNING"
        started = threading.Event()

        async def main() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            self._loop.set_exception_handler(self._loop_error)
            started.set()
            await serve(self._app, config, shutdown_trigger=self._stop.wait)

        def run() -> None:
            with asyncio.Runner(loop_factory=_Loop) as runner:
                runner.run(main())

        self._thread = threading.Thread(target=run, name="apns-stand-in", daemon=True)
        self._thread.start()
        started.wait(5)
        wait_for(self._accepts, 10, f"the APNs stand-in on port {self.port}", interval=0.02)
        return self

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        if self._loop is not None and self._stop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(10)
        self._thread = None

    def __enter__(self) -> ApnsServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        if self._stop is not None and self._stop.is_set():
            return  # stopping cuts open connections short; that is no error of the code under test
        loop.default_exception_handler(context)

    def _accepts(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=0.2):
                return True
        except OSError:
            return False

    # The protocol.

    async def _app(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.connections.add(tuple(scope.get("client") or ()))
        self.in_flight += 1
        self.max_streams = max(self.max_streams, self.in_flight)
        try:
            status, headers, answer = await self._handle(scope, body)
        finally:
            self.in_flight -= 1
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    async def _handle(self, scope, body: bytes) -> tuple[int, list, bytes]:
        """Check one request as APNs does; return (status, headers, body)."""
        match = PATH.match(scope["path"])
        token = match["token"] if match else ""
        apns_id = str(uuid.uuid4())
        try:
            if scope.get("http_version") != "2":
                raise Refused(505, "HTTP/2 is required")
            headers = self._headers(scope)
            apns_id = headers.get("apns-id") or apns_id
            if match is None:
                raise Refused(404, "BadPath")
            if scope["method"] != "POST":
                raise Refused(405, "MethodNotAllowed")
            if not token:
                raise Refused(400, "MissingDeviceToken")
            bearer = self._verify_jwt(headers.get("authorization"))
            payload = self._check(headers, body)
            if not HEX.match(token):
                raise Refused(400, "BadDeviceToken")
            answer = self._next_answer(token)
            if answer.expire_jwt:
                with self._lock:
                    self._expired.add(bearer)
                raise Refused(403, "ExpiredProviderToken")
            if answer.delay:
                # Cut short by stop(): a handler still asleep would hold up the server's shutdown.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), answer.delay)
            if answer.status != 200:
                extra = {"timestamp": answer.timestamp_ms} if answer.timestamp_ms is not None else {}
                raise Refused(answer.status, answer.reason, retry_after=answer.retry_after, **extra)
        except Refused as refusal:
            refused = Refusal(token, refusal.status, refusal.reason)
            if self.record:
                self.refused.append(refused)
            if self.on_answer is not None:
                self.on_answer(refused)
            out = {"reason": refusal.reason}
            if "timestamp" in refusal.extra:
                out["timestamp"] = refusal.extra["timestamp"]
            response_headers = [(b"apns-id", apns_id.encode()), (b"content-type", b"application/json")]
            if refusal.extra.get("retry_after") is not None:
                response_headers.append((b"retry-after", refusal.extra["retry_after"].encode()))
            return refusal.status, response_headers, json.dumps(out).encode()
        push = Push(token, headers, payload, bearer, apns_id, tuple(scope.get("client") or ()))
        if self.record:
            self.received.append(push)
        if self.on_answer is not None:
            self.on_answer(push)
        return 200, [(b"apns-id", apns_id.encode())], b""

    @staticmethod
    def _headers(scope) -> dict[str, str]:
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name = raw_name.decode("latin-1").lower()
            if name in headers and name.startswith(("apns-", "authorization")):
                raise Refused(400, "DuplicateHeaders")
            headers[name] = raw_value.decode("utf-8", "replace")
        return headers

    def _next_answer(self, token: str) -> Answer:
        with self._lock:
            queue = self._scripts.get(token)
            return queue.popleft() if queue else Answer()

    def _verify_jwt(self, authorization: str | None) -> str:
        """The bearer JWT, checked as APNs does (ES256 with the team's key, kid, iss, iat within the hour)."""
        if not authorization:
            raise Refused(403, "MissingProviderToken")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Refused(403, "InvalidProviderToken")
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") != "ES256" or header.get("kid") != self.key_id:
                raise Refused(403, "InvalidProviderToken")
            claims = jwt.decode(
                token,
                self.public_key,
                algorithms=["ES256"],
                issuer=self.team_id,
                options={"require": ["iss", "iat"], "verify_iat": False},
            )
        except jwt.InvalidTokenError as exc:
            raise Refused(403, "InvalidProviderToken") from exc
        with self._lock:
            if token not in self.jwts:
                self.jwts.append(token)
            expired = token in self._expired
        iat = claims["iat"]
        if not isinstance(iat, int) or iat > time.time() + 60:
            raise Refused(403, "InvalidProviderToken")
        if expired or iat < time.time() - TOKEN_MAX_AGE:
            raise Refused(403, "ExpiredProviderToken")
        return token

    def _check(self, headers: dict[str, str], body: bytes) -> dict:
        """The headers and payload of a notification request; return the payload."""
        topic = headers.get("apns-topic")
        if not topic:
            raise Refused(400, "MissingTopic")
        if topic not in self.topics:
            raise Refused(400, "TopicDisallowed")
        push_type = headers.get("apns-push-type", "")
        if push_type not in PUSH_TYPES:
            raise Refused(400, "InvalidPushType")
        priority = headers.get("apns-priority", "10")
        if priority not in ("1", "5", "10") or (push_type == "background" and priority != "5"):
            raise Refused(400, "BadPriority")
        if "apns-expiration" in headers and not headers["apns-expiration"].isdigit():
            raise Refused(400, "BadExpirationDate")
        if len(headers.get("apns-collapse-id", "").encode()) > COLLAPSE_ID_LIMIT:
            raise Refused(400, "BadCollapseId")
        if "apns-id" in headers:
            try:
                uuid.UUID(headers["apns-id"])
            except ValueError as exc:
                raise Refused(400, "BadMessageId") from exc
        if not body:
            raise Refused(400, "PayloadEmpty")
        if len(body) > PAYLOAD_LIMIT:
            raise Refused(413, "PayloadTooLarge")
        try:
            payload = json.loads(body)
        except ValueError as exc:
            raise Refused(400, "BadPayload") from exc  # Apple's own text for this is not documented
        if not isinstance(payload, dict) or not isinstance(payload.get("aps"), dict):
            raise Refused(400, "BadPayload")
        aps = payload["aps"]
        if push_type == "background" and aps.get("content-available") != 1:
            raise Refused(400, "BadPayload")
        if push_type == "alert" and not ({"alert", "badge", "sound"} & set(aps)):
            raise Refused(400, "BadPayload")
        return payload


# Running on its own (`make run`, benchmarks).

CLIENT_SETTINGS = ("APNS_KEY_FILE", "APNS_KEY_ID", "APNS_TEAM_ID", "APNS_TOPIC", "APNS_ENDPOINT", "APNS_CA_FILE")


def client_settings(server: ApnsServer) -> dict[str, str]:
    """The APNS_* settings an app needs to send to server (as environment values)."""
    return {name: str(value) for name, value in server.settings().items() if name in CLIENT_SETTINGS}


def describe(answer: Push | Refusal) -> str:
    """One line about one request (the token's last 8 characters only: it is the phone's secret)."""
    if isinstance(answer, Refusal):
        return f"{answer.status} {answer.reason} for …{answer.token[-8:]}"
    alert = answer.payload.get("aps", {}).get("alert")
    title = alert.get("title", "") if isinstance(alert, dict) else alert or ""
    push_type, topic = answer.headers.get("apns-push-type"), answer.headers.get("apns-topic")
    return f"200 {push_type} push to …{answer.token[-8:]} ({topic}): {title!r}"


def main(argv: list[str] | None = None) -> int:
    """Serve a stand-in until SIGTERM or Ctrl-C, its key and certificates kept in --dir with settings.json."""
    found = standalone.parser("tests.support.apns_server", "A local APNs for development: Apple's provider API "
                              "over HTTP/2 and TLS, the JWT checked.",
                              "the .p8 key, the CA, the certificate")  # fmt: skip
    found.add_argument("--topic", default=TOPIC, help="the app's bundle id, the apns-topic it accepts")
    found.add_argument("--team-id", default=TEAM_ID)
    found.add_argument("--key-id", default=KEY_ID)
    args = found.parse_args(argv)
    where = standalone.directory(args)
    server = ApnsServer(
        where, team_id=args.team_id, key_id=args.key_id, topics=(args.topic,), port=args.port, host=args.host,
        keep=True, record=False, on_answer=None if args.quiet else lambda answer: print(describe(answer), flush=True),
    )  # fmt: skip
    server.start()
    try:
        standalone.serve(where, client_settings(server), f"APNs stand-in on {server.url} (topic {args.topic})")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
