"""Chaos: PostgreSQL restarts (fast shutdown, 5 s down) while the API takes traffic and a worker sends.

The test runs its own cluster (tests/support/pgcluster.py), never the machine's shared server, with
a gunicorn web process (the production configuration), a worker, the sweeper and the SMTP sink on it.
During the outage the API answers 503 problem+json with Retry-After, a signed-in page the app's own
503 page and /healthz names PostgreSQL; afterwards the same processes answer again, every accepted
notification's e-mail arrives, and at most one arrives twice (the send whose `sent` commit was lost).
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass

import psycopg
import pytest
import sqlalchemy as sa

from app import create_app
from app.api_keys.service import create_api_key
from app.extensions import db
from app.queueing import enqueue_deliveries
from tests.conftest import TEST_CONFIG
from tests.realtime.helpers import Gunicorn, session_cookie
from tests.support import load, pgcluster, processes
from tests.support.waiting import free_port, wait_for

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.skipif(not pgcluster.available(), reason="needs PostgreSQL 15's server binaries"),
]

DATABASE = "hato_h_pg_chaos_test"
USERS = 20
BACKLOG = 400  # e-mails queued before the outage, so the worker is mid-batch when the server goes
DOWN_SECONDS = 5
RECOVERY_SECONDS = 20  # from the server's restart to the first 202 again
DELIVERY_SECONDS = 60  # from the end of the traffic until every accepted e-mail has arrived
POST_INTERVAL = 0.05  # about 20 requests/s: a few hundred notifications in the whole test
MESSAGE_ID = re.compile(r"<delivery-(\d+)@")


@dataclass
class Answer:
    at: float
    status: int
    mimetype: str
    retry_after: str | None
    body: str


class Traffic(threading.Thread):
    """POSTs one notification after another, each with a fresh Idempotency-Key, and records every answer."""

    def __init__(self, port: int, key: str) -> None:
        super().__init__(name="chaos-traffic", daemon=True)
        self.port, self.key = port, key
        self.answers: list[Answer] = []
        self.halt = threading.Event()

    def post(self, n: int) -> Answer:
        body = {"type": "chaos", "recipient": f"chaos-{n % USERS}", "title": f"Chaos {n}", "body": "…"}
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json",
                   "Idempotency-Key": str(uuid.uuid4())}  # fmt: skip
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("POST", "/v1/notifications", json.dumps(body), headers)
            reply = conn.getresponse()
            mimetype = (reply.getheader("Content-Type") or "").split(";")[0]
            return Answer(
                time.monotonic(), reply.status, mimetype, reply.getheader("Retry-After"), reply.read().decode()
            )
        finally:
            conn.close()

    def run(self) -> None:
        n = 0
        while not self.halt.wait(POST_INTERVAL):
            self.answers.append(self.post(n))
            n += 1

    def accepted_ids(self) -> list[int]:
        return [r["notification_id"] for a in self.answers if a.status == 202 for r in json.loads(a.body)["results"]]


@pytest.fixture
def own_cluster():
    with pgcluster.cluster() as server:
        yield server


def seed_chaos_world(users: int) -> None:
    """A type that e-mails (`chaos`) and `users` users chaos-0, chaos-1… in the app's migrated database."""
    db.session.execute(
        sa.text(
            "INSERT INTO notification_types (type, label, default_email, priority) "
            "VALUES ('chaos', 'Chaos', true, 'default')"
        )
    )
    db.session.execute(
        sa.text(
            "INSERT INTO users (external_id, email, display_name) "
            "SELECT 'chaos-' || g, 'chaos-' || g || '@example.com', 'Chaos ' || g FROM generate_series(0, :n - 1) g"
        ),
        {"n": users},
    )


@pytest.fixture
def chaos_app(own_cluster, monkeypatch):
    """An app on the private cluster's migrated database: a type that e-mails, USERS users, an API key."""
    from flask_migrate import upgrade

    url = own_cluster.create_database(DATABASE)
    monkeypatch.setenv("DATABASE_URL", url)  # read by Config(), so the Redis namespace follows it too
    application = create_app(dict(TEST_CONFIG))
    with application.app_context():
        upgrade()
        seed_chaos_world(USERS)
        application.api_key = create_api_key(None, "chaos")
        application.user_id = db.session.execute(sa.text("SELECT min(id) FROM users")).scalar_one()
        db.session.commit()
        db.session.remove()
        db.engine.dispose()
    return application


@pytest.fixture
def pg_stack(own_cluster, chaos_app, stack):
    """Web (gunicorn), worker and sweeper on the private cluster; the stack fixture stops them all."""
    url = own_cluster.url(DATABASE)
    stack["env"].update(DATABASE_URL=url, DELIVERY_BATCH_SIZE="20")
    stack["start"]("worker", "worker")
    stack["start"]("sweeper", "sweep")
    web = Gunicorn(free_port(), sockets=0, env={**stack["env"], "API_RATE_LIMIT": "100000 per minute"},
                   log_path=stack["tmp"] / "web.log")  # fmt: skip
    try:
        web.start(timeout=60)
        stack["procs"]["web"] = web.proc
        yield {**stack, "web": web, "url": url}
    finally:
        web.stop()


def _get(port: int, path: str, headers: dict) -> tuple[int, str, str | None, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers)
        reply = conn.getresponse()
        mimetype = (reply.getheader("Content-Type") or "").split(";")[0]
        return reply.status, mimetype, reply.getheader("Retry-After"), reply.read().decode()
    finally:
        conn.close()


def _email_delivery_ids(url: str, notification_ids: list[int]) -> set[int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT id FROM notification_deliveries WHERE channel = 'email' AND notification_id = ANY(%s)",
            (notification_ids,),
        )
        return {row[0] for row in rows}


def _arrivals(log) -> Counter:
    return Counter(int(m.group(1)) for line in processes.message_ids(log) if (m := MESSAGE_ID.search(line)))


def test_postgres_restart_costs_503s_not_errors_and_loses_nothing(own_cluster, chaos_app, pg_stack, record_property):
    port = pg_stack["web"].port
    pids = {name: proc.pid for name, proc in pg_stack["procs"].items()}
    cookie = session_cookie(chaos_app, chaos_app.user_id)
    page_headers = {"Cookie": f"session={cookie}", "Accept": "text/html"}
    assert _get(port, "/inbox", page_headers)[0] == 200

    with chaos_app.app_context():
        backlog = load.create_email_deliveries(BACKLOG, prefix="backlog", type_="chaos")
        assert enqueue_deliveries("default", "email", backlog)
        db.session.remove()
        db.engine.dispose()
    traffic = Traffic(port, chaos_app.api_key)
    traffic.start()
    try:
        wait_for(lambda: len(_arrivals(pg_stack["log"])) >= 40, 30, "the first e-mails to arrive")

        own_cluster.stop("fast")
        down_at = time.monotonic()
        arrived_at_stop = sum(_arrivals(pg_stack["log"]).values())
        time.sleep(1)  # requests in flight at the shutdown have had their answer
        health_status, _, _, health = _get(port, "/healthz", {})
        page = _get(port, "/inbox", page_headers)
        time.sleep(max(0.0, DOWN_SECONDS - (time.monotonic() - down_at)))
        own_cluster.start()
        up_at = time.monotonic()

        wait_for(lambda: any(a.status == 202 and a.at > up_at for a in traffic.answers), RECOVERY_SECONDS,
                 "a 202 after the restart")  # fmt: skip
        recovered_after = next(a.at for a in traffic.answers if a.status == 202 and a.at > up_at) - up_at
        time.sleep(1)  # some traffic after the recovery too
    finally:
        traffic.halt.set()
        traffic.join(15)

    assert arrived_at_stop < BACKLOG, "the worker had sent the whole backlog before the outage"
    # During the outage: /healthz names PostgreSQL, Redis stays ok; the page is the app's own 503 page.
    assert health_status == 503
    assert json.loads(health)["failing"] == ["postgres"] and json.loads(health)["checks"]["redis"]["ok"]
    status, mimetype, retry_after, text = page
    assert (status, mimetype) == (503, "text/html") and int(retry_after) > 0
    assert "<h1>503" in text and "Traceback" not in text

    # Every answer was a 202 or a 503 problem with Retry-After; the outage produced some 503s.
    statuses = Counter(a.status for a in traffic.answers)
    assert set(statuses) <= {202, 503}, statuses
    refused = [a for a in traffic.answers if a.status == 503]
    assert refused, "no request met the outage"
    assert all(a.mimetype == "application/problem+json" and int(a.retry_after) > 0 for a in refused)
    assert all("Traceback" not in a.body for a in refused)

    # The same processes serve again: none exited, none was restarted.
    assert all(proc.poll() is None for proc in pg_stack["procs"].values())
    assert {name: proc.pid for name, proc in pg_stack["procs"].items()} == pids

    # Every accepted notification's e-mail arrives, and the backlog's; at most one twice (one interruption).
    accepted = _email_delivery_ids(pg_stack["url"], traffic.accepted_ids())
    assert len(accepted) == len(traffic.accepted_ids())
    expected = accepted | set(backlog)
    wait_for(lambda: expected <= set(_arrivals(pg_stack["log"])), DELIVERY_SECONDS, "every accepted e-mail")
    arrived = _arrivals(pg_stack["log"])
    duplicates = sum(n - 1 for n in arrived.values())
    summary = (
        f"postgres restart: accepted={len(accepted)} backlog={BACKLOG} arrived_at_stop={arrived_at_stop} "
        f"refused={len(refused)} recovered_after={recovered_after:.1f}s "
        f"delivered={len(expected & set(arrived))} duplicates={duplicates}"
    )
    print(summary)
    record_property("chaos", summary)
    assert set(arrived) == expected
    assert duplicates <= 1
