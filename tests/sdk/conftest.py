"""The SDK against the real app: a live server (tests/conftest.py), a type and an API key committed for it."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.api_keys import service as keys
from app.api_keys.scopes import SCOPES
from app.extensions import db
from tests.factories import NotificationTypeFactory


@dataclass
class Live:
    """Where the live app answers, and a key with every scope."""

    url: str
    key: str
    app: object

    def key_with(self, *scopes: str, rate: float | None = None, burst: int | None = None) -> str:
        """Another API key (committed), with these scopes and this rate limit."""
        with self.app.app_context():
            key = keys.create_api_key(None, "sdk-extra", scopes or SCOPES)
            if rate is not None:
                keys.set_quota(None, keys.key_prefix(key), rate, burst, None)
            db.session.commit()
            db.session.remove()
        return key


@pytest.fixture
def live(live_server) -> Live:
    """The `comment` type and a key with every scope, committed for the live server (tables emptied after)."""
    with live_server.app_context():
        NotificationTypeFactory(type="comment")
        key = keys.create_api_key(None, "sdk", SCOPES)
        db.session.commit()
        db.session.remove()
    return Live(live_server.base_url, key, live_server)


class Flaky(BaseHTTPRequestHandler):
    """Answers each POST with the next of the server's planned (status, headers, body), recording the headers."""

    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append(dict(self.headers))
        status, headers, body = self.server.plan.pop(0) if self.server.plan else self.server.last
        payload = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {"Content-Length": str(len(payload)), **headers}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


UNAVAILABLE = (
    503,
    {"Content-Type": "application/problem+json", "Retry-After": "0"},
    {"type": "about:blank", "title": "Service Unavailable", "status": 503, "detail": "Busy, try again."},
)
ACCEPTED = (202, {"Content-Type": "application/json"}, {"type": "comment", "created": 1, "results": []})


@pytest.fixture
def flaky():
    """A tiny local HTTP server that answers 503 (Retry-After: 0) then 202; `.seen` holds each request's headers."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    server.plan, server.last, server.seen = [UNAVAILABLE], ACCEPTED, []
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.shutdown()
    server.server_close()
