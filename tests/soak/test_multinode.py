"""Soak (issue 34): 4 web processes, 2 workers and 2 sweepers under mixed traffic to every channel, with faults.

For SOAK_SECONDS (default 300): API ingest on every channel at once (e-mail; push to an iPhone and an Android
phone; SMS through Twilio, Vonage behind it; chat to Slack, LINE, Teams and Discord), a workflow whose SMS
follows after a delay, a topic fanout every FANOUT_EVERY seconds, campaigns, members reading their inbox, and
signed-in websockets that ack every frame. Every provider is a local stand-in speaking its protocol
(tests/soak/standins.py). PostgreSQL is a primary with a synchronous standby (tests/support/pgcluster.py),
reached through a multi-host DATABASE_URL; the realtime store is a Redis Cluster of 3 masters and 3 replicas.

Faults: every SOAK_KILL_EVERY seconds (default 30) a random process is killed with -9 and started again (the
last web, worker and sweeper are never killed: the witnesses whose memory is watched); at a third of the run
the PostgreSQL primary is killed and its standby promoted; at two thirds a Redis Cluster master is killed.

Then: every accepted notification is delivered on every channel it was due on; at most one duplicate per
channel per interruption (a kill or a store failing over); every socket's badge equals the database's count;
the witnesses' memory grows at most 10 % over the last 20 minutes (of a shorter run: its last two thirds).
Prints p50/p99 of ingest, badge frame and mail receipt per 5-minute window. Skipped by `make test` (marker
`soak`); `make soak` runs it.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter, defaultdict

import pytest
import sqlalchemy as sa

from app import create_app
from app.extensions import db, redis
from app.inbox.queries import badge_count
from tests.conftest import TEST_CONFIG
from tests.realtime.helpers import create_api_key, session_cookie
from tests.soak import report, traffic, world
from tests.soak.cluster import Cluster
from tests.soak.faults import Faults, kill_loop, store_faults
from tests.soak.standins import PROVIDERS, StandIns
from tests.support import pgcluster, processes
from tests.support.redis_cluster import RedisCluster, missing_binaries
from tests.support.smtp import stamped_arrivals
from tests.support.waiting import free_port

pytestmark = [
    pytest.mark.soak,
    pytest.mark.chaos,
    pytest.mark.skipif(not pgcluster.available(), reason="needs PostgreSQL's server binaries (initdb, pg_rewind)"),
    pytest.mark.skipif(bool(missing_binaries()), reason="needs redis-server and redis-cli for a Redis Cluster"),
]

SECONDS = float(os.environ.get("SOAK_SECONDS", "300"))
KILL_EVERY = float(os.environ.get("SOAK_KILL_EVERY", "30"))
DATABASE = "hato_soak"
USERS = 60
SOCKETS = 16  # four on each web process
INGEST_THREADS, INGEST_RPS = 2, 1.0  # per thread; each notification is 8 messages: 2 CPUs run everything here
FANOUT_EVERY = 60.0  # a topic post to all USERS
CAMPAIGNS = 3  # spread over the run
RSS_EVERY = 10.0
MAX_GROWTH = 0.10
DRAIN_SECONDS = 240
DELIVERY_ID = re.compile(r"<delivery-(\d+)@")

# What is still to do, by kind (empty once drained).
UNFINISHED_SQL = """SELECT 'delivery ' || channel || ' ' || status, count(*) FROM notification_deliveries
    WHERE status IN ('pending', 'sending') GROUP BY 1
    UNION ALL SELECT 'campaign ' || status, count(*) FROM campaigns WHERE status <> 'done' GROUP BY 1
    UNION ALL SELECT 'workflow sms not sent', count(*) FROM notifications n WHERE n.type = 'soak-flow'
      AND NOT EXISTS (SELECT 1 FROM notification_deliveries d WHERE d.notification_id = n.id AND d.channel = 'sms'
                      AND d.status = 'sent') HAVING count(*) > 0"""
NOTIFICATIONS_SQL = "SELECT id, type, title FROM notifications"
DELIVERIES_SQL = "SELECT id, notification_id, channel, status FROM notification_deliveries"


def settle(predicate, seconds: float) -> None:
    """Poll predicate once a second until it holds or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(1)


def unfinished() -> dict[str, int]:
    db.session.rollback()
    return dict(db.session.execute(sa.text(UNFINISHED_SQL)).all())


@pytest.fixture
def stores(tmp_path):
    """A PostgreSQL primary with its synchronous standby, and a Redis Cluster."""
    with pgcluster.failover_pair() as pair, RedisCluster(tmp_path / "redis") as cluster:
        yield pair, cluster


@pytest.fixture
def soak_app(stores, tmp_path, monkeypatch):
    """An app on the pair's migrated database (the multi-host URL) and the Redis Cluster, with the soak's world."""
    from flask_migrate import upgrade

    pair, cluster = stores
    pair.primary.sql(f'CREATE DATABASE "{DATABASE}"')
    monkeypatch.setenv("DATABASE_URL", pair.url(DATABASE))
    monkeypatch.setenv("REALTIME_REDIS_URL", cluster.seeds_url)
    monkeypatch.setenv("REALTIME_REDIS_CLUSTER", "true")
    with StandIns(tmp_path / "standins") as standins:
        application = create_app(dict(TEST_CONFIG))
        with application.app_context():
            upgrade()
            application.user_ids = world.seed(USERS, "U0SOAK", standins.webhook("teams"), standins.webhook("discord"))
            redis.client().flushdb()
            db.session.remove()
        application.standins = standins
        yield application
        with application.app_context():
            redis.client().flushdb()
            db.engine.dispose()


def test_everything_under_kill_9_and_two_store_failovers(soak_app, stores, tmp_path, record_property):
    app, (pair, redis_cluster) = soak_app, stores
    standins: StandIns = app.standins
    sink_port, sink_log = free_port(), tmp_path / "sink.log"
    ours = dict(
        DATABASE_URL=os.environ["DATABASE_URL"],
        REALTIME_REDIS_URL=redis_cluster.seeds_url,
        REALTIME_REDIS_CLUSTER="true",
        SMTP_URL=f"smtp://127.0.0.1:{sink_port}",
        EMAIL_PROVIDER="smtp",
        SMTP_TIMEOUT="2",
        DELIVERY_LEASE_SECONDS="10",  # every provider's timeout (2 s) fits in what the lease leaves
        DELIVERY_LEDGER_SYNCHRONOUS="true",  # a failover then re-sends at most the message in flight
        SWEEP_INTERVAL_SECONDS="1",
        SWEEP_REQUEUE_AFTER_SECONDS="5",
        API_RATE_LIMIT="100000 per minute",
        PYTHONUNBUFFERED="1",
    )
    env = {**os.environ, **standins.env, **ours}
    sink = processes.start_sink(sink_port, sink_log, tmp_path / "sink.out", stamp=True)
    key = create_api_key(app)
    cluster = Cluster(env, tmp_path)
    stop, hang_up = threading.Event(), threading.Event()  # sockets listen on after the writers and faults stop
    tally, campaigns, faults = traffic.Tally(), [], Faults()
    rss: dict[str, list[tuple[float, int]]] = defaultdict(list)
    recipients = [f"soak-{n}" for n in range(1, USERS + 1)]
    sockets, threads = [], []
    try:
        cluster.start()
        urls = cluster.base_urls
        tally.unseen = {recipients[n]: [] for n in range(SOCKETS)}
        clients = [
            traffic.SocketClient(
                app.user_ids[n], recipients[n], session_cookie(app, app.user_ids[n]), urls[n % len(urls)], tally
            )  # fmt: skip
            for n in range(SOCKETS)
        ]
        cookies = [client.cookie for client in clients]
        started, wall_started = time.monotonic(), time.time()
        sockets = [threading.Thread(target=client.run, args=(hang_up,), daemon=True) for client in clients]
        threads = [
            threading.Thread(target=traffic.ingest, args=(urls, key, recipients, INGEST_RPS, stop, tally, n))
            for n in range(INGEST_THREADS)
        ]
        threads += [
            threading.Thread(target=traffic.fan_out, args=(urls, key, world.TOPIC, FANOUT_EVERY, stop, tally)),
            threading.Thread(target=traffic.read_inboxes, args=(urls, cookies, stop, tally)),
            threading.Thread(target=traffic.run_campaigns, args=(app, SECONDS / (CAMPAIGNS + 1), stop, campaigns)),
            threading.Thread(target=kill_loop, args=(cluster, KILL_EVERY, stop, faults, started)),
            threading.Thread(target=store_faults, args=(pair, redis_cluster, SECONDS, stop, faults, started)),
        ]
        for thread in sockets + threads:
            thread.start()
        while not stop.wait(max(0.0, min(RSS_EVERY, started + SECONDS - time.monotonic()))):
            if time.monotonic() >= started + SECONDS:
                break
            for name in cluster.witnesses:
                rss[name].append((time.monotonic() - started, cluster.rss_kib(name)))
        stop.set()
        for thread in threads:
            thread.join(traffic.RETRY_SECONDS + 60)  # an ingest in flight finishes its retries; a repair its rewind
        assert cluster.dead() == [], f"processes exited by themselves: {cluster.dead()}"

        with app.app_context():
            # Each wait ends by itself: what is still wrong after it is asserted below, after the report.
            settle(lambda: not unfinished(), DRAIN_SECONDS)
            still_to_do = unfinished()
            notifications = {row.id: row for row in db.session.execute(sa.text(NOTIFICATIONS_SQL))}
            deliveries = list(db.session.execute(sa.text(DELIVERIES_SQL)))
            settle(lambda: all(c.last == badge_count(c.user_id) for c in clients), 30)
            wrong = [(c.user_id, c.last, badge_count(c.user_id)) for c in clients if c.last != badge_count(c.user_id)]
            db.session.remove()
    finally:
        stop.set()
        hang_up.set()
        for thread in sockets + threads:
            thread.join(15)
        cluster.stop()
        processes.stop(sink)

    mail = stamped_arrivals(sink_log)
    arrivals = {
        **standins.arrivals(),
        "email": Counter(m.group(1) for _, mid in mail if (m := DELIVERY_ID.search(mid))),
    }
    by_channel = _delivered(notifications, deliveries, arrivals)
    missing = _missing(tally, notifications, by_channel)
    duplicates = _duplicates(arrivals)
    interruptions = len(faults.kills) + len(faults.events)
    received_at = {int(m.group(1)): at for at, mid in reversed(mail) if (m := DELIVERY_ID.search(mid))}
    mail_seconds = [
        (tally.accepted_at[d.notification_id], received_at[d.id] - tally.accepted_at[d.notification_id])
        for d in deliveries
        if d.channel == "email" and d.id in received_at and d.notification_id in tally.accepted_at
    ]
    latency = report.windows(
        {"ingest": tally.ingest_seconds, "badge frame": tally.badge_seconds, "mail receipt": mail_seconds},
        wall_started,
    )
    growths = {name: report.growth(samples, SECONDS) for name, samples in rss.items()}
    statuses = Counter((d.channel, d.status) for d in deliveries)
    rows = [
        ("duration (s)", f"{SECONDS:.0f}"),
        ("processes", "4 web, 2 workers, 2 sweepers (witnesses: " + ", ".join(cluster.witnesses) + ")"),
        ("kills (kill -9)", f"{len(faults.kills)}: " + " ".join(f"{t:.0f}s:{name}" for t, name in faults.kills)),
        ("store faults", "; ".join(f"{t:.0f}s {what}" for t, what in faults.events)),
        ("accepted (API 202)", f"{len(tally.accepted)} notifications, {len(tally.fanouts)} topic fanouts"),
        ("campaigns", str(len(campaigns))),
        ("ledger", ", ".join(f"{c} {s} {n}" for (c, s), n in sorted(statuses.items()))),
        ("arrivals", ", ".join(f"{p} {sum(c.values())}" for p, c in sorted(arrivals.items()))),
        ("duplicates per channel", ", ".join(f"{c} {n}" for c, n in sorted(duplicates.items()))
         + f" (allowed {interruptions} each)"),
        ("due and not delivered", str(len(missing))),
        ("answers", ", ".join(f"{w} {o}: {n}" for (w, o), n in sorted(tally.answers.items()))),
        ("sockets", f"{len(clients)} ({sum(c.connects for c in clients)} connects, "
                    f"{sum(c.frames for c in clients)} badge frames)"),
    ]  # fmt: skip
    text = "\n".join([
        "\nSoak summary", report.summary(rows), "", "Latency per 5-minute window", latency, "",
        "Memory of the processes never killed", report.memory(rss, SECONDS),
    ])  # fmt: skip
    print(text)
    record_property("soak", text)
    assert still_to_do == {}, "not drained"
    assert faults.problems == []
    assert tally.accepted <= set(notifications), "an accepted notification is missing from the database"
    assert {s for _, s in statuses} <= {"sent", "skipped"} and not statuses.get(("email", "skipped")), statuses
    assert missing == [], f"{len(missing)} due deliveries never arrived, e.g. {missing[:5]}"
    assert all(n <= interruptions for n in duplicates.values()), duplicates
    assert {c.base_url for c in clients} == set(urls)
    assert wrong == [], "(user, the socket's badge, the database's)"
    assert all(grew <= MAX_GROWTH for _, _, grew in growths.values()), growths


def _delivered(notifications, deliveries, arrivals: dict[str, Counter]) -> dict[str, set[int]]:
    """Per channel, the notifications whose message reached the channel's stand-ins (every provider of it)."""
    marker_of = {nid: row.title for nid, row in notifications.items()}
    found: dict[str, set[int]] = defaultdict(set)
    for d in deliveries:
        if d.channel == "email":
            if arrivals["email"].get(str(d.id)):
                found["email"].add(d.notification_id)
            continue
        providers = PROVIDERS.get(d.channel)
        if providers is None:
            continue
        marker = marker_of[d.notification_id]
        got = [arrivals[p].get(marker, 0) > 0 for p in providers]
        if any(got) if d.channel == "sms" else all(got):  # SMS: one of the two providers sends it
            found[d.channel].add(d.notification_id)
    return found


def _missing(tally, notifications, delivered: dict[str, set[int]]) -> list[tuple[int, str]]:
    """(notification, channel) pairs due and not delivered: the accepted ones, and every topic fanout's."""
    due = set(tally.accepted) | {nid for nid, row in notifications.items() if row.title in set(tally.fanouts)}
    return sorted((nid, channel) for nid in due for channel in world.DUE[notifications[nid].type]
                  if nid not in delivered.get(channel, set()))  # fmt: skip


def _duplicates(arrivals: dict[str, Counter]) -> dict[str, int]:
    """Per channel: messages that arrived more than once (a push or chat row sent again reaches every phone or
    account again: counted once, as the row it was)."""
    found = {"email": sum(n - 1 for n in arrivals["email"].values())}
    for channel, providers in PROVIDERS.items():
        markers = set().union(*(arrivals[p] for p in providers)) - {None}
        # SMS: one provider or the other sends each message, so a second one at either is a duplicate.
        times = sum if channel == "sms" else max
        found[channel] = sum(max(0, times(arrivals[p].get(m, 0) for p in providers) - 1) for m in markers)
    return found
