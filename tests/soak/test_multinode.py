"""Soak: 2 web processes, 2 workers and 2 sweepers under mixed traffic, one of them killed with -9 every 30 s.

Traffic for SOAK_SECONDS (default 300): API ingest on both web processes, inbox reads, a campaign to
every user now and then, and websocket clients on both web processes. Every SOAK_KILL_EVERY seconds
(default 30) a random web, worker or sweeper process is killed with -9 and started again. Then:
every accepted notification (and every campaign e-mail) arrives at the SMTP sink, at most one
duplicate e-mail per kill, and every socket's badge equals the database's count. Skipped by
`make test` (marker `soak`); `make soak` runs it. Prints a summary table.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections import Counter

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.inbox.queries import badge_count
from tests.realtime.helpers import create_api_key, session_cookie
from tests.soak import traffic
from tests.soak.cluster import Cluster
from tests.support import processes
from tests.support.waiting import free_port, wait_for

pytestmark = [pytest.mark.soak, pytest.mark.chaos]

SECONDS = float(os.environ.get("SOAK_SECONDS", "300"))
KILL_EVERY = float(os.environ.get("SOAK_KILL_EVERY", "30"))
USERS = 100
SOCKETS = 20  # half on each web process
INGEST_THREADS, INGEST_RPS = 2, 3.0  # per thread: light enough for 2 CPUs shared with everything else
CAMPAIGNS = 5  # spread over the run
DRAIN_SECONDS = 180
DELIVERY_ID = re.compile(r"<delivery-(\d+)@")

SEED_SQL = [
    "INSERT INTO notification_types (type, label, default_email) VALUES ('comment', 'Comments', true)",
    """INSERT INTO users (email, display_name, external_id, timezone)
       SELECT 'soak' || g || '@example.com', 'Soak ' || g, 'soak-' || g, 'UTC' FROM generate_series(1, :users) g""",
]


def scalar(sql: str, **params):
    db.session.rollback()
    return db.session.execute(sa.text(sql), params).scalar()


def drained() -> bool:
    """No e-mail waiting or in flight, every campaign fanned out."""
    return not scalar(
        "SELECT (SELECT count(*) FROM notification_deliveries WHERE status IN ('pending', 'sending'))"
        " + (SELECT count(*) FROM campaigns WHERE status <> 'done')"
    )


def kill_loop(cluster: Cluster, stop: threading.Event, kills: list[tuple[float, str]], started: float) -> None:
    """At every multiple of KILL_EVERY seconds, kill -9 a random process and start it again."""
    while not stop.wait(max(0.0, started + (len(kills) + 1) * KILL_EVERY - time.monotonic())):
        name = random.choice(cluster.names)
        kills.append((time.monotonic() - started, name))
        cluster.kill_and_restart(name)


def test_two_of_everything_under_kill_9(app, tmp_path, record_property):
    sink_port = free_port()
    sink_log = tmp_path / "sink.log"
    sink = processes.start_sink(sink_port, sink_log, tmp_path / "sink.out")
    env = dict(
        os.environ,
        SMTP_URL=f"smtp://127.0.0.1:{sink_port}",
        EMAIL_PROVIDER="smtp",
        DELIVERY_LEASE_SECONDS="8",
        SMTP_TIMEOUT="2",  # one send fits in what the short lease leaves
        SWEEP_INTERVAL_SECONDS="1",
        SWEEP_REQUEUE_AFTER_SECONDS="5",
        PYTHONUNBUFFERED="1",
    )
    with app.app_context():
        for statement in SEED_SQL:
            db.session.execute(sa.text(statement), {"users": USERS})
        db.session.commit()
        user_ids = list(db.session.execute(sa.text("SELECT id FROM users ORDER BY id")).scalars())
        db.session.remove()
    key = create_api_key(app)
    cluster = Cluster(env, tmp_path)
    stop, tally, campaigns, kills = threading.Event(), traffic.Tally(), [], []
    hang_up = threading.Event()  # the sockets listen on until the end, after the writers and the killer stop
    sockets: list[threading.Thread] = []
    threads: list[threading.Thread] = []
    try:
        cluster.start()
        urls = cluster.base_urls
        clients = [
            traffic.SocketClient(user_id, session_cookie(app, user_id), urls[n % len(urls)])
            for n, user_id in enumerate(user_ids[:SOCKETS])
        ]
        recipients = [f"soak-{n}" for n in range(1, USERS + 1)]
        cookies = [session_cookie(app, user_id) for user_id in user_ids[:SOCKETS]]
        started = time.monotonic()
        sockets = [threading.Thread(target=client.run, args=(hang_up,), daemon=True) for client in clients]
        threads = [
            threading.Thread(target=traffic.ingest, args=(urls, key, recipients, INGEST_RPS, stop, tally, n))
            for n in range(INGEST_THREADS)
        ]
        threads.append(threading.Thread(target=traffic.read_inboxes, args=(urls, cookies, stop, tally)))
        threads.append(
            threading.Thread(target=traffic.run_campaigns, args=(app, SECONDS / (CAMPAIGNS + 1), stop, campaigns))
        )
        threads.append(threading.Thread(target=kill_loop, args=(cluster, stop, kills, started)))
        for thread in sockets + threads:
            thread.start()
        stop.wait(SECONDS)
        stop.set()
        for thread in threads:
            thread.join(traffic.RETRY_SECONDS + 15)  # an ingest in flight finishes its retries
        assert cluster.dead() == [], f"processes exited by themselves: {cluster.dead()}"

        with app.app_context():
            wait_for(drained, DRAIN_SECONDS, "every e-mail to be sent and every campaign done", interval=1)
            sent = dict(db.session.execute(sa.text(
                "SELECT d.id, d.notification_id FROM notification_deliveries d WHERE d.channel = 'email'"
                " AND d.status = 'sent'")).all())  # fmt: skip
            statuses = Counter(db.session.execute(sa.text(
                "SELECT status FROM notification_deliveries WHERE channel = 'email'")).scalars())  # fmt: skip
            known = set(db.session.execute(sa.text("SELECT id FROM notifications")).scalars())
            campaign_rows = scalar("SELECT count(*) FROM notifications WHERE campaign_id IS NOT NULL")
            wait_for(lambda: all(c.last == badge_count(c.user_id) for c in clients), 30, "every socket's badge")
            wrong = [(c.user_id, c.last, badge_count(c.user_id)) for c in clients if c.last != badge_count(c.user_id)]
    finally:
        stop.set()
        hang_up.set()
        for thread in sockets + threads:
            thread.join(15)
        cluster.stop()
        processes.stop(sink)

    arrivals = Counter(processes.message_ids(sink_log))
    arrived_ids = {int(m.group(1)) for message_id in arrivals if (m := DELIVERY_ID.search(message_id))}
    duplicates = sum(n - 1 for n in arrivals.values())
    delivered_notifications = {sent[i] for i in arrived_ids if i in sent}
    lost = tally.accepted - delivered_notifications
    summary = _table(SECONDS, kills, tally, campaigns, campaign_rows, statuses, arrivals, duplicates, lost, clients)
    print(summary)
    record_property("soak", summary)
    assert tally.accepted <= known, "an accepted notification is missing from the database"
    assert set(statuses) == {"sent"}, statuses
    assert arrived_ids == set(sent), "the sink and the ledger disagree on which e-mails went out"
    assert lost == set(), f"{len(lost)} accepted notifications never reached the sink"
    assert duplicates <= len(kills)
    assert {c.base_url for c in clients} == set(urls)
    assert wrong == []


def _table(seconds, kills, tally, campaigns, campaign_rows, statuses, arrivals, duplicates, lost, clients) -> str:
    by_kind = Counter(re.sub(r"\d", "", name) for _, name in kills)
    answers = ", ".join(f"{what} {outcome}: {n}" for (what, outcome), n in sorted(tally.answers.items()))
    rows = [
        ("duration (s)", f"{seconds:.0f}"),
        ("kills (kill -9)", f"{len(kills)}: " + ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items()))),
        ("kill schedule", " ".join(f"{t:.0f}s:{name}" for t, name in kills)),
        ("accepted (API 202)", str(len(tally.accepted))),
        ("campaigns / their notifications", f"{len(campaigns)} / {campaign_rows}"),
        ("e-mail ledger", ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))),
        ("delivered (distinct at sink)", str(len(arrivals))),
        ("duplicates at sink", f"{duplicates} (allowed {len(kills)})"),
        ("accepted not delivered", str(len(lost))),
        ("answers", answers),
        (
            "sockets checked",
            f"{len(clients)} ({sum(c.connects for c in clients)} connects, "
            f"{sum(c.frames for c in clients)} badge frames)",
        ),  # fmt: skip
    ]
    width = max(len(name) for name, _ in rows)
    return "\nSoak summary\n" + "\n".join(f"  {name.ljust(width)}  {value}" for name, value in rows)
