"""A local Web Push service for tests: verifies the VAPID JWT and decrypts each message (RFC 8291/8292).

Runs a threaded HTTP server on 127.0.0.1. `subscribe()` makes a receiver key pair and auth secret like a
browser does and returns the subscription JSON; every POST to its endpoint is checked (ES256 signature
against the k= key, aud = this server's origin, exp at most 24 h ahead) and decrypted with http_ece.
`answer[endpoint] = (status, headers)` makes it refuse.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import http_ece
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from app.cli.vapid import generate_keys
from app.extensions import db
from app.models import PushSubscription


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class VapidError(Exception):
    """The request's VAPID authorization is wrong."""


def verify_vapid(authorization: str, origin: str, now: float | None = None) -> dict:
    """Check `vapid t=<jwt>, k=<key>`: ES256 signature, aud, exp; return the claims."""
    scheme, _, params = authorization.partition(" ")
    if scheme.lower() != "vapid":
        raise VapidError(f"scheme {scheme!r}")
    values = dict(part.strip().split("=", 1) for part in params.split(","))
    header_b64, claims_b64, signature_b64 = values["t"].split(".")
    header = json.loads(unb64url(header_b64))
    claims = json.loads(unb64url(claims_b64))
    if header.get("alg") != "ES256":
        raise VapidError(f"alg {header.get('alg')!r}")
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(values["k"]))
    signature = unb64url(signature_b64)
    try:
        key.verify(
            encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")),
            f"{header_b64}.{claims_b64}".encode(),
            ec.ECDSA(hashes.SHA256()),
        )
    except InvalidSignature as exc:
        raise VapidError("bad signature") from exc
    now = now or time.time()
    if claims.get("aud") != origin:
        raise VapidError(f"aud {claims.get('aud')!r} is not {origin!r}")
    if not now < claims["exp"] <= now + 24 * 3600:
        raise VapidError(f"exp {claims['exp']} is not within 24 h")
    if not str(claims.get("sub", "")).startswith(("mailto:", "https:")):
        raise VapidError("sub missing")
    return claims


@dataclass
class Receiver:
    """One browser subscription's private side."""

    endpoint: str
    private_key: ec.EllipticCurvePrivateKey
    auth: bytes

    def subscription(self) -> dict:
        public = self.private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return {"endpoint": self.endpoint, "keys": {"p256dh": b64url(public), "auth": b64url(self.auth)}}


@dataclass
class Received:
    """One accepted push message, decrypted."""

    endpoint: str
    headers: dict
    claims: dict
    payload: dict


@dataclass
class PushService:
    """The server's state: receivers, what arrived, and programmed refusals."""

    origin: str = ""
    receivers: dict[str, Receiver] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    answer: dict[str, tuple[int, dict]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def subscribe(self) -> dict:
        endpoint = f"{self.origin}/push/{b64url(os.urandom(12))}"
        receiver = Receiver(endpoint, ec.generate_private_key(ec.SECP256R1()), os.urandom(16))
        self.receivers[endpoint] = receiver
        return receiver.subscription()


def _handler(service: PushService):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep test output quiet
            return

        def do_POST(self) -> None:  # noqa: N802
            endpoint = service.origin + self.path
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            receiver = service.receivers.get(endpoint)
            if receiver is None:
                return self._reply(404, {})
            status, headers = service.answer.get(endpoint, (201, {}))
            if status >= 300:
                return self._reply(status, headers)
            try:
                claims = verify_vapid(self.headers.get("Authorization", ""), service.origin)
                if self.headers.get("Content-Encoding") != "aes128gcm":
                    raise VapidError(f"content-encoding {self.headers.get('Content-Encoding')!r}")
                plain = http_ece.decrypt(
                    body, private_key=receiver.private_key, auth_secret=receiver.auth, version="aes128gcm"
                )
            except Exception as exc:  # a test failure, recorded and answered 400 like a real push service
                with service.lock:
                    service.rejected.append(f"{type(exc).__name__}: {exc}")
                return self._reply(400, {})
            with service.lock:
                service.received.append(
                    Received(endpoint, {k.lower(): v for k, v in self.headers.items()}, claims, json.loads(plain))
                )
            self._reply(201, {"Location": f"{endpoint}/messages/{len(service.received)}"})

        def _reply(self, status: int, headers: dict) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


class PushServer:
    """Start/stop the local push service on a free port."""

    def __init__(self) -> None:
        self.service = PushService()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.service))
        self.service.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> PushService:
        self.thread.start()
        return self.service

    def __exit__(self, *exc_info) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


KEYS = generate_keys()


@pytest.fixture
def push_service():
    """A Web Push service on 127.0.0.1 that verifies VAPID and decrypts what it gets."""
    with PushServer() as service:
        yield service


@pytest.fixture
def vapid(app, monkeypatch):
    """VAPID keys configured and the webpush provider on for this test; returns (public, private)."""
    monkeypatch.setitem(app.config, "VAPID_PUBLIC_KEY", KEYS[0])
    monkeypatch.setitem(app.config, "VAPID_PRIVATE_KEY", KEYS[1])
    monkeypatch.setitem(app.config, "VAPID_SUBJECT", "mailto:ops@hato.test")
    monkeypatch.setitem(app.config, "PUSH_PROVIDER", "webpush")
    monkeypatch.setitem(app.config, "PUSH_TIMEOUT", 5)
    return KEYS


def add_subscription(user, subscription: dict) -> PushSubscription:
    """Store a browser subscription for user (as POST /push/subscriptions would)."""
    row = PushSubscription(
        user_id=user.id,
        endpoint=subscription["endpoint"],
        p256dh=subscription["keys"]["p256dh"],
        auth=subscription["keys"]["auth"],
    )
    db.session.add(row)
    db.session.flush()
    return row
