"""Chaos: the web process is killed after its commits, while its post-commit hand-off is stuck.

A real gunicorn process answers POST /v1/notifications, but its Redis is a socket that accepts and
never replies, so the thread that sends delivery jobs hangs; then the process gets SIGKILL. No job
ever reached Redis. The committed `pending` rows are the truth: a real sweeper enqueues them, a real
worker sends them, and the sink receives every e-mail exactly once. Bounded: 60 s at most.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import threading
import time
from collections import Counter

import pytest

from app.api_keys.service import create_api_key
from app.extensions import db
from app.queueing import get_queue
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support import load, processes
from tests.support.waiting import free_port, wait_for

pytestmark = pytest.mark.chaos

TOTAL = 40
DEADLINE_SECONDS = 60


class SilentRedis:
    """A TCP server on 127.0.0.1 that accepts connections, reads what it is sent and never answers."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received = 0
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._swallow, args=(conn,), daemon=True).start()

    def _swallow(self, conn: socket.socket) -> None:
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            self.received += len(data)

    def close(self) -> None:
        self.listener.close()
        for conn in self.connections:
            conn.close()


def _start_web(stack, redis_port: int) -> tuple:
    """gunicorn (docs/production.md's API-only line) whose Redis is the silent server; return (process, port)."""
    port = free_port()
    env = dict(
        stack["env"],
        REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
        RATELIMIT_ENABLED="0",
        BASE_URL=f"http://127.0.0.1:{port}",
        WEB_WORKERS="1",
        WEB_MAX_SOCKETS="0",
        WEB_REQUEST_THREADS="4",
    )
    web = processes.spawn(
        ["-m", "gunicorn", "-c", "python:app.realtime.gunicorn_conf", "wsgi:app", "--bind", f"127.0.0.1:{port}"],
        env,
        stack["tmp"] / "web.log",
    )
    stack["procs"]["web"] = web

    def answers() -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/v1/ping")
            return conn.getresponse().status == 200
        except OSError:
            return False

    wait_for(answers, 30, "gunicorn to answer /v1/ping")
    return web, port


def test_web_process_killed_with_its_hand_off_stuck_loses_nothing(app, stack, record_property):
    with app.app_context():
        NotificationTypeFactory(type="receipt", default_email=True, priority="default")
        recipients = [UserFactory(external_id=f"buyer-{n}").external_id for n in range(TOTAL)]
        key = create_api_key(None, "chaos")
        db.session.commit()
    silent = SilentRedis()
    try:
        web, port = _start_web(stack, silent.port)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        started = time.monotonic()
        for n, recipient in enumerate(recipients):
            body = json.dumps({"type": "receipt", "recipient": recipient, "title": f"Receipt {n}"})
            conn.request(
                "POST",
                "/v1/notifications",
                body,
                {"Authorization": f"Bearer {key}", "Content-Type": "application/json", "Idempotency-Key": f"r-{n}"},
            )
            response = conn.getresponse()
            assert response.status == 202, response.read()
            response.read()
        answered_in = time.monotonic() - started
        wait_for(lambda: silent.received > 0, 10, "the hand-off thread to talk to its (silent) Redis")
        os.killpg(web.pid, signal.SIGKILL)
        web.wait(5)
    finally:
        silent.close()
    assert answered_in < 5  # no request waited for the Redis that never answers

    with app.app_context():
        assert load.status_counts() == {"pending": TOTAL}
        assert get_queue("default").count == 0  # nothing reached the real Redis
        stack["start"]("sweeper", "sweep")
        stack["start"]("worker", "worker")
        wait_for(lambda: load.status_counts().get("sent", 0) == TOTAL, DEADLINE_SECONDS, "every row to be sent")
        ids = db.session.execute(db.text("SELECT id FROM notification_deliveries")).scalars().all()

    arrived = Counter(processes.message_ids(stack["log"]))
    summary = (
        f"web process killed with its hand-off stuck: sent={len(arrived)} of {TOTAL}, "
        f"duplicates={sum(n - 1 for n in arrived.values())}"
    )
    print(summary)
    record_property("chaos", summary)
    assert set(arrived) == {f"<delivery-{i}@hato.127.0.0.1>" for i in ids}
    assert all(n == 1 for n in arrived.values())
