"""A product's webhook receiver for tests: verifies each request with the standardwebhooks package.

A threaded HTTP/1.1 server on 127.0.0.1 (keep-alive, like a real one). Every verified request is
counted at the wire (`wire`, a Counter of webhook-ids: duplicates show) and stored once by its
webhook-id (`store`, the receiver's idempotent store). `answer` is the status it replies with (a
callable may decide per request), `delay` how long it takes. stop()/start() take it down and bring
it back on the same port.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


class Receiver:
    """Verify, count, store; see the module docstring."""

    def __init__(self, secret: str = "", port: int = 0) -> None:
        self.secret = secret
        self.port = port
        self.answer: int | object = 200
        self.delay = 0.0
        self.lock = threading.Lock()
        self.wire: Counter[str] = Counter()
        self.store: dict[str, dict] = {}
        self.rejected = 0
        self.arrivals: list[float] = []
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/hato"

    def handle(self, headers, body: bytes) -> int:
        if self.delay:
            time.sleep(self.delay)
        try:
            payload = Webhook(self.secret).verify(body, dict(headers.items()))
        except WebhookVerificationError:
            with self.lock:
                self.rejected += 1
            return 401
        webhook_id = headers["webhook-id"]
        status = self.answer(webhook_id) if callable(self.answer) else self.answer
        with self.lock:
            self.wire[webhook_id] += 1
            self.arrivals.append(time.monotonic())
            if 200 <= status < 300:
                self.store.setdefault(webhook_id, payload)  # idempotent: a second copy changes nothing
        return status

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

            def do_POST(self):  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = receiver.handle(self.headers, body)
                reply = json.dumps({"status": status}).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                except OSError:
                    self.close_connection = True  # the sender gave up waiting (a timeout test)

            def do_GET(self):  # noqa: N802 - /count for a benchmark in another process; /reset empties
                if self.path == "/reset":
                    with receiver.lock:
                        receiver.wire.clear()
                        receiver.store.clear()
                        receiver.rejected = 0
                with receiver.lock:
                    figures = {
                        "stored": len(receiver.store),
                        "wire": receiver.wire.total(),
                        "rejected": receiver.rejected,
                    }
                reply = json.dumps(figures).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def serve(self) -> None:
        """Serve until killed (a receiver in its own process: `python -m tests.webhooks.receiver PORT SECRET`)."""
        self.start()
        threading.Event().wait()

    def types(self) -> Counter[str]:
        with self.lock:
            return Counter(p["type"] for p in self.store.values())


if __name__ == "__main__":
    import sys

    Receiver(sys.argv[2], int(sys.argv[1])).serve()
