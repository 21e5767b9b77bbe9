"""Chaos: Redis stops for 5 s and comes back EMPTY while the API takes traffic and sockets are open.

Everything runs against a private redis-server (tests/support/redisserver.py), never the shared one:
gunicorn with the production config (2 workers, websockets on), a worker, the sweeper and the SMTP
sink. A thread POSTs notifications all along; signed-in websocket clients stay open. Redis gets
SHUTDOWN NOSAVE, stays down 5 s and starts with nothing: every queued job, rate-limit counter,
socket count, worker registration and subscription is gone. (The worker is even started before
Redis exists, and must wait for it.) Then:
- every POST answered 202: the rate limiter falls back to memory, the post-commit hand-off (jobs,
  badge events) fails quietly after the commit, and nothing else on the ingest path needs Redis;
- /healthz named Redis as failing while it was down;
- every accepted notification reaches the sink, at most one duplicate (one interruption): the
  sweeper enqueues from PostgreSQL what Redis lost, the worker survives the outage, registers again
  in the empty Redis (so the console lists it) and still stops cleanly on SIGTERM;
- every socket ends showing the database's count. The socket users get notifications only while
  Redis is down, so their badge events were all lost: only the hub's resync after it resubscribed
  (or a reconnect's greeting) can show them the right number.
Bounded: well under 60 s.
"""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field

import pytest
import sqlalchemy as sa
from rq import Worker
from simple_websocket import ConnectionClosed

from app.api_keys.service import create_api_key
from app.extensions import db
from app.inbox import queries
from tests.factories import NotificationTypeFactory, UserFactory
from tests.realtime.helpers import Gunicorn, close_quietly, connect, frame_count, session_cookie
from tests.support import processes
from tests.support.redisserver import RedisServer
from tests.support.waiting import free_port, wait_for

pytestmark = pytest.mark.chaos

SOCKET_USERS = 4
OTHER_USERS = 10
DOWN_SECONDS = 5.0
BEFORE_SECONDS = 1.5
AFTER_SECONDS = 2.0
POST_INTERVAL = 0.05  # ~20 POSTs/s: steady traffic on two CPUs shared with the whole stack
DELIVERED_WITHIN = 30.0
SYNCED_WITHIN = 15.0


@dataclass
class Post:
    """One POST and its answer."""

    phase: str
    recipient: str
    status: int
    body: str
    seconds: float


@dataclass
class SocketClient:
    """A signed-in websocket that reconnects when closed, as the inbox page's htmx ws extension does."""

    base_url: str
    cookie: str
    last_count: int | None = None
    connects: int = 0
    closes: list = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                ws = connect(self.base_url, self.cookie)
            except (ConnectionClosed, OSError) as exc:
                self.closes.append(repr(exc))
                self.stop.wait(0.5)
                continue
            self.connects += 1
            try:
                while not self.stop.is_set():
                    frame = ws.receive(timeout=0.2)
                    if frame is not None and 'data-count="' in frame:
                        self.last_count = frame_count(frame)
            except ConnectionClosed as exc:
                self.closes.append(getattr(exc, "reason", None))
                self.stop.wait(0.5)
            finally:
                close_quietly(ws)


def _post_loop(port: int, key: str, phase: list[str], socket_ids: list[str], other_ids: list[str], out: list[Post]):
    """POST until phase[0] is "stop": socket users get notifications only while Redis is down."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    n = 0
    while (current := phase[0]) != "stop":
        pool = socket_ids + other_ids if current == "down" else other_ids
        recipient = pool[n % len(pool)]
        body = json.dumps({"type": "receipt", "recipient": recipient, "title": f"Receipt {n}"})
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", "Idempotency-Key": f"k-{n}"}
        started = time.monotonic()
        try:
            conn.request("POST", "/v1/notifications", body, headers)
            response = conn.getresponse()
            text = response.read().decode(errors="replace")[:300]
            out.append(Post(current, recipient, response.status, text, time.monotonic() - started))
        except OSError as exc:  # a dropped connection counts as a failed POST, then reconnect
            out.append(Post(current, recipient, 0, repr(exc), time.monotonic() - started))
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        n += 1
        time.sleep(POST_INTERVAL)
    conn.close()


def _text(path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _after_worker_missed_redis(server: RedisServer, worker_log) -> threading.Thread:
    """Start server from a thread as soon as the worker's log says it found no Redis."""

    def start() -> None:
        wait_for(lambda: "worker lost Redis" in _text(worker_log), 45, "the worker to find no Redis")
        server.start()

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    return thread


def _stop_worker(proc) -> int | None:
    """SIGTERM the worker (a warm shutdown) and return its exit code."""
    if proc is None or proc.poll() is not None:
        return proc.returncode if proc else None
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(15)
    except subprocess.TimeoutExpired:
        processes.stop(proc)
        return None


def _healthz(base_url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(base_url + "/healthz", timeout=15) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _badge(user_id: int) -> int:
    """The count the badge should show, read fresh from the database."""
    db.session.rollback()
    return queries.badge_counts(user_id).shown()


def test_redis_restarted_empty_loses_nothing(app, stack, tmp_path, record_property):
    with app.app_context():
        NotificationTypeFactory(type="receipt", default_email=True, default_in_app=True, priority="default")
        socket_users = [UserFactory(external_id=f"watcher-{n}") for n in range(SOCKET_USERS)]
        others = [UserFactory(external_id=f"buyer-{n}") for n in range(OTHER_USERS)]
        key = create_api_key(None, "chaos")
        db.session.commit()
        socket_ids = {u.external_id: u.id for u in socket_users}
        other_ids = [u.external_id for u in others]
        cookies = {u.id: session_cookie(app, u.id) for u in socket_users}

    server = RedisServer(tmp_path / "redis")  # not started yet: the worker must wait for it
    stack["env"]["REDIS_URL"] = server.url
    port = free_port()
    web = Gunicorn(
        port,
        sockets=16,
        log_path=tmp_path / "web.log",
        env=dict(stack["env"], WEB_WORKERS="2", WEB_REQUEST_THREADS="8", API_RATE_LIMIT="100000 per minute"),
    )
    clients = {user_id: SocketClient(web.base_url, cookie) for user_id, cookie in cookies.items()}
    threads = [threading.Thread(target=c.run, daemon=True) for c in clients.values()]
    phase, posts = ["before"], []
    poster = threading.Thread(target=_post_loop, args=(port, key, phase, list(socket_ids), other_ids, posts))
    try:
        stack["start"]("worker", "worker")
        stack["start"]("sweeper", "sweep")
        # Redis starts once the worker has found it missing; gunicorn boots meanwhile (healthy once Redis is up).
        starter = _after_worker_missed_redis(server, tmp_path / "worker.log")
        web.start(timeout=60)
        starter.join()
        assert server.running, "the worker never reported Redis missing"
        wait_for(lambda: Worker.count(connection=server.client()) == 1, 30, "the worker to register")
        wait_for(lambda: "sweeper running" in _text(tmp_path / "sweeper.log"), 30, "the sweeper to start")
        for thread in threads:
            thread.start()
        wait_for(lambda: all(c.last_count == 0 for c in clients.values()), 15, "every socket's first badge")
        poster.start()
        time.sleep(BEFORE_SECONDS)

        phase[0] = "down"
        server.stop()
        outage_started = time.monotonic()
        health_started = time.monotonic()
        health_down = _healthz(web.base_url)
        health_seconds = time.monotonic() - health_started
        time.sleep(max(0.0, DOWN_SECONDS - (time.monotonic() - outage_started)))
        outage = time.monotonic() - outage_started
        server.start()  # empty: no save, no AOF
        back = time.monotonic()
        phase[0] = "after"
        time.sleep(AFTER_SECONDS)
        phase[0] = "stop"
        poster.join(30)

        accepted = [p for p in posts if p.status == 202]
        refused = [p for p in posts if p.status != 202]
        during = [p for p in posts if p.phase == "down"]
        with app.app_context():
            expected = set(
                db.session.execute(sa.text("SELECT id FROM notification_deliveries WHERE channel = 'email'")).scalars()
            )

            def arrived() -> Counter:
                return Counter(processes.message_ids(stack["log"]))

            unread = {user_id: _badge(user_id) for user_id in clients}
            wait_for(
                lambda: all(clients[u].last_count == unread[u] for u in clients),
                SYNCED_WITHIN,
                f"every socket to show the database's count {unread}",
            )
            synced_after = time.monotonic() - back
            wait_for(
                lambda: {f"<delivery-{i}@hato.127.0.0.1>" for i in expected} <= set(arrived()),
                DELIVERED_WITHIN,
                "every accepted notification at the sink",
            )
            delivered_after = time.monotonic() - back
            # The empty Redis forgot the worker; its heartbeat registered it again (the console lists it).
            wait_for(lambda: Worker.count(connection=server.client()) == 1, 15, "the worker to register again")
        health_after = _healthz(web.base_url)
    finally:
        phase[0] = "stop"
        for client in clients.values():
            client.stop.set()
        for thread in threads:
            thread.join(5)
        web.stop()
        processes.stop(stack["procs"].pop("sweeper", None))
        worker_exit = _stop_worker(stack["procs"].pop("worker", None))
        server.stop()

    counts = arrived()
    duplicates = sum(n - 1 for n in counts.values())
    reconnects = sum(c.connects - 1 for c in clients.values())
    summary = (
        f"redis restarted empty after {outage:.1f}s down: posts={len(posts)} (during outage {len(during)}, "
        f"slowest {max(p.seconds for p in during):.2f}s), healthz while down {health_seconds:.2f}s, "
        f"accepted={len(accepted)}, refused={len(refused)}, delivered={len(counts)} of {len(expected)}, "
        f"duplicates={duplicates}, socket reconnects={reconnects}, badges={[c.last_count for c in clients.values()]}; "
        f"after Redis was back: all delivered in {delivered_after:.1f}s, badges right in {synced_after:.1f}s"
    )
    print(summary)
    record_property("chaos", summary)
    assert not refused, refused[:5]
    assert len(during) >= DOWN_SECONDS / POST_INTERVAL / 4, "too few POSTs landed during the outage to prove anything"
    assert any(p.recipient in socket_ids for p in during)
    assert len(expected) == len(accepted)  # one e-mail delivery per accepted notification
    assert set(counts) == {f"<delivery-{i}@hato.127.0.0.1>" for i in expected}
    assert duplicates <= 1
    assert health_down[0] == 503 and health_down[1]["failing"] == ["redis"], health_down
    assert health_after[0] == 200, health_after
    assert worker_exit == 0  # SIGTERM still means a warm shutdown after all that
