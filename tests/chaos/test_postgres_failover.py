"""Chaos: the PostgreSQL primary is killed (kill -9) and its synchronous standby promoted, as Patroni would.

The test builds its own pair from the installed server binaries (tests/support/pgcluster.py FailoverPair,
never the machine's shared server) and gives every process the multi-host DATABASE_URL with
target_session_attrs=read-write: a gunicorn web process with websockets, a worker sending to the SMTP
sink and the sweeper. With API traffic, a topic fanout and signed-in sockets running, the primary dies;
a second later the standby is promoted. Nothing is restarted. Afterwards: every notification answered
202 before the kill is on the new primary and its e-mail arrives, and so does the fanout's; every other
answer was a 503 problem+json with Retry-After; at most one e-mail arrives twice; every socket shows the
database's badge. Then the old primary is rewound (pg_rewind) and re-attached as the synchronous standby,
and a failover back passes the same checks.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter

import psycopg
import pytest
import sqlalchemy as sa

from app import create_app
from app.api_keys.service import create_api_key
from app.extensions import db
from app.inbox import queries
from app.topics import service as topics
from tests.chaos.test_postgres_restart import Traffic, _arrivals, _email_delivery_ids, seed_chaos_world
from tests.chaos.test_redis_restart import SocketClient
from tests.conftest import TEST_CONFIG
from tests.realtime.helpers import Gunicorn, session_cookie
from tests.support import pgcluster
from tests.support.waiting import free_port, wait_for

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.skipif(not pgcluster.available(), reason="needs PostgreSQL 15's server binaries (initdb, pg_rewind)"),
]

DATABASE = "hato_h_pg_failover_test"
USERS = 20  # the traffic's recipients (chaos-0 …), every one a follower of the topic
SOCKETS = 3  # chaos-0 … chaos-2 keep a signed-in websocket open throughout
TOPIC = "everyone"
DETECTION_SECONDS = 1.0  # the HA manager's time to notice the primary is gone (Patroni's is longer: its TTL)
RECOVERY_SECONDS = 20  # from the promotion to the first 202 again
DELIVERY_SECONDS = 60  # from the end of the traffic until every accepted e-mail has arrived
BADGE_SECONDS = 15


@pytest.fixture(scope="module")
def pair():
    """A primary and its synchronous standby, built once for the module."""
    with pgcluster.failover_pair() as built:
        yield built


@pytest.fixture
def ha_app(pair, monkeypatch):
    """An app on the pair's migrated database (through the multi-host URL): USERS users following TOPIC, a key."""
    from flask_migrate import upgrade

    pair.primary.sql(f'CREATE DATABASE "{DATABASE}"')
    url = pair.url(DATABASE)
    monkeypatch.setenv("DATABASE_URL", url)  # read by Config(), so the Redis namespace follows it too
    application = create_app(dict(TEST_CONFIG))
    with application.app_context():
        upgrade()
        seed_chaos_world(USERS)
        topics.put_topic(TOPIC, "Everyone", "")
        topics.change_subscribers(TOPIC, [f"chaos-{n}" for n in range(USERS)], [])
        application.api_key = create_api_key(None, "chaos")
        application.socket_users = list(
            db.session.execute(
                sa.text("SELECT id FROM users WHERE external_id = ANY(:ids) ORDER BY id"),
                {"ids": [f"chaos-{n}" for n in range(SOCKETS)]},
            ).scalars()
        )
        db.session.commit()
        db.session.remove()
        db.engine.dispose()
    application.url = url
    return application


@pytest.fixture
def ha_stack(ha_app, stack):
    """Web (gunicorn with websockets), worker and sweeper on the multi-host URL; the stack fixture stops them."""
    # Each sent record commits synchronously: a failover then re-sends at most the message in flight.
    stack["env"].update(DATABASE_URL=ha_app.url, DELIVERY_BATCH_SIZE="20", DELIVERY_LEDGER_SYNCHRONOUS="true")
    stack["start"]("worker", "worker")
    stack["start"]("sweeper", "sweep")
    web = Gunicorn(free_port(), sockets=16, env={**stack["env"], "API_RATE_LIMIT": "100000 per minute"},
                   log_path=stack["tmp"] / "web.log")  # fmt: skip
    try:
        web.start(timeout=60)
        stack["procs"]["web"] = web.proc
        yield {**stack, "web": web}
    finally:
        web.stop()


def _post_fanout(port: int, key: str, title: str) -> int:
    body = {"type": "chaos", "topic": TOPIC, "title": title, "body": "…"}
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", "Idempotency-Key": title}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/v1/notifications", json.dumps(body), headers)
        return conn.getresponse().status
    finally:
        conn.close()


def _fanout_email_ids(url: str, title: str) -> set[int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT d.id FROM notification_deliveries d JOIN notifications n ON n.id = d.notification_id "
            "WHERE d.channel = 'email' AND n.title = %s",
            (title,),
        )
        return {row[0] for row in rows}


def _badge(user_id: int) -> int:
    db.session.rollback()
    return queries.badge_counts(user_id).shown()


def _failover_round(number: int, pair, app, stack, sockets: dict[int, SocketClient], duplicates_before: int) -> str:
    """Traffic, a fanout, kill -9 of the primary and promotion of the standby; assert what the issue expects."""
    port, log = stack["web"].port, stack["log"]
    traffic = Traffic(port, app.api_key)
    arrived_before = sum(_arrivals(log).values())
    traffic.start()
    try:
        wait_for(lambda: sum(_arrivals(log).values()) >= arrived_before + 20, 30, "e-mails arriving before the kill")
        fanout = f"Fanout {number}"
        assert _post_fanout(port, app.api_key, fanout) == 202
        dead = pair.primary
        killed_at = time.monotonic()
        accepted_before_kill = len(traffic.accepted_ids())
        pair.fail_over(DETECTION_SECONDS)
        promoted_at = time.monotonic()
        wait_for(lambda: any(a.status == 202 and a.at > promoted_at for a in traffic.answers), RECOVERY_SECONDS,
                 "a 202 after the promotion")  # fmt: skip
        recovered_after = next(a.at for a in traffic.answers if a.status == 202 and a.at > promoted_at) - promoted_at
        time.sleep(1)  # some traffic after the recovery too
    finally:
        traffic.halt.set()
        traffic.join(15)

    # Every answer was a 202 or a 503 problem with Retry-After.
    statuses = Counter(a.status for a in traffic.answers)
    assert set(statuses) <= {202, 503}, statuses
    refused = [a for a in traffic.answers if a.status == 503]
    assert all(a.mimetype == "application/problem+json" and int(a.retry_after) > 0 for a in refused)
    assert all("Traceback" not in a.body for a in refused)
    assert not pair.primary.in_recovery() and dead is not pair.primary

    # Every accepted notification is on the new primary (before the kill too: the standby was synchronous),
    # its e-mail and the fanout's arrive; at most one twice for this interruption.
    accepted = traffic.accepted_ids()
    assert accepted_before_kill and len(accepted) > accepted_before_kill
    emails = _email_delivery_ids(app.url, accepted)
    assert len(emails) == len(accepted)
    wait_for(lambda: len(_fanout_email_ids(app.url, fanout)) == USERS, DELIVERY_SECONDS, "the fanout to every follower")
    expected = emails | _fanout_email_ids(app.url, fanout)
    wait_for(lambda: expected <= set(_arrivals(log)), DELIVERY_SECONDS, "every accepted e-mail")
    arrivals = _arrivals(log)
    duplicates = sum(n - 1 for n in arrivals.values()) - duplicates_before
    assert duplicates <= 1, f"{duplicates} e-mails arrived twice in round {number}"

    # Badges are right after reconnect: every socket shows the database's count.
    with app.app_context():
        wait_for(lambda: all(c.last_count == _badge(u) for u, c in sockets.items()), BADGE_SECONDS,
                 "every socket to show the database's badge")  # fmt: skip
        db.session.remove()
    return (
        f"round {number}: accepted={len(accepted)} (before the kill {accepted_before_kill}) refused={len(refused)} "
        f"gap={promoted_at - killed_at:.1f}s recovered_after_promotion={recovered_after:.1f}s "
        f"fanout={USERS} duplicates={duplicates}"
    )


def test_failover_and_back_lose_no_acknowledged_notification(pair, ha_app, ha_stack, record_property):
    procs = ha_stack["procs"]
    pids = {name: proc.pid for name, proc in procs.items()}
    sockets = {
        user_id: SocketClient(ha_stack["web"].base_url, session_cookie(ha_app, user_id))
        for user_id in ha_app.socket_users
    }
    threads = [threading.Thread(target=client.run, daemon=True) for client in sockets.values()]
    for thread in threads:
        thread.start()
    summaries = []
    try:
        wait_for(lambda: all(c.last_count is not None for c in sockets.values()), 15, "every socket's first badge")
        summaries.append(_failover_round(1, pair, ha_app, ha_stack, sockets, 0))
        started = time.monotonic()
        pair.reattach()  # pg_rewind: the old primary follows the new one, synchronously
        reattached = time.monotonic() - started
        duplicates = sum(n - 1 for n in _arrivals(ha_stack["log"]).values())
        summaries.append(_failover_round(2, pair, ha_app, ha_stack, sockets, duplicates))
    finally:
        for client in sockets.values():
            client.stop.set()
        for thread in threads:
            thread.join(5)
    summary = f"postgres failover: {'; '.join(summaries)}; reattach with pg_rewind {reattached:.1f}s"
    print(summary)
    record_property("chaos", summary)
    # The same processes served throughout: none exited, none was restarted.
    assert all(proc.poll() is None for proc in procs.values())
    assert {name: proc.pid for name, proc in procs.items()} == pids
    assert all(c.connects >= 1 for c in sockets.values())
