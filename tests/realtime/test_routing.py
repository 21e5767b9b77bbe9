"""Per-node routing across two real web processes: no pattern subscription, and B never hears A's events."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from app.extensions import redis
from app.live import registry
from app.live.publish import publish_badge
from tests.realtime.helpers import Gunicorn, close_quietly, connect, insert_notification, wait_for_count
from tests.support.waiting import free_port, wait_for

pytestmark = pytest.mark.committed

EVENTS = 40


def metric(base_url: str, name: str) -> dict[str, float]:
    """Return node -> value of one per-node metric, scraped from base_url's /metrics (loopback: allowed)."""
    with urllib.request.urlopen(base_url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    found = {}
    for node, value in re.findall(rf'^{name}{{node="([^"]+)"}} (\S+)$', text, re.MULTILINE):
        found[node] = float(value)
    return found


@pytest.fixture
def two_processes(app, tmp_path):
    env = {"METRICS_CACHE_SECONDS": "0"}  # every scrape reads Redis afresh
    servers = [Gunicorn(free_port(), env=env, log_path=tmp_path / f"web{n}.log").start() for n in (1, 2)]
    yield servers
    for server in servers:
        server.stop()


def test_an_event_reaches_only_the_process_holding_the_users_socket(app, make_user, two_processes):
    a, b = two_processes
    (alice, alice_cookie), (bob, bob_cookie) = make_user(), make_user()
    on_a, on_b = connect(a.base_url, alice_cookie), connect(b.base_url, bob_cookie)
    try:
        wait_for_count(on_a, 0, acking=True)
        wait_for_count(on_b, 0, acking=True)
        with app.app_context():
            client = redis.realtime()
            routes = registry.nodes_of(client, [alice, bob])
            assert len(routes) == 2 and sorted(map(tuple, routes.values())) == sorted([(alice,), (bob,)])
            node_a = next(node for node, users in routes.items() if users == [alice])
            node_b = next(node for node, users in routes.items() if users == [bob])
            assert client.execute_command("PUBSUB", "NUMPAT") == 0  # nobody listens by pattern any more
            # each process listens on its own node channel (the suite's in-process server may have one too)
            channels = {c.decode() for c in client.pubsub_channels(registry.node_channel("*"))}
            assert {registry.node_channel(node_a), registry.node_channel(node_b)} <= channels
            for n in range(EVENTS):
                insert_notification(alice, title=f"For Alice {n}", key=f"routing-{n}")
                assert publish_badge([alice])
        wait_for_count(on_a, EVENTS, timeout=10, acking=True)
        inbound = {}

        def settled():
            inbound.update(metric(a.base_url, "hato_realtime_inbound_events_total"))
            return inbound.get(node_a, 0) >= EVENTS

        wait_for(settled, 10, "A's counters to reach /metrics")
        assert inbound.get(node_b, 0) == 0  # B read nothing of Alice's events

        # any process answers for all of them (the suite's in-process server may be a node too)
        def both_counted() -> bool:
            sockets = metric(b.base_url, "hato_realtime_sockets")
            return sockets.get(node_a) == 1 and sockets.get(node_b) == 1

        wait_for(both_counted, 10, "both nodes' sockets")
    finally:
        close_quietly(on_a)
        close_quietly(on_b)


def test_a_crashed_process_drops_out_of_the_registry_within_the_ttl(app, make_user, tmp_path):
    server = Gunicorn(free_port(), env={"PRESENCE_TTL_SECONDS": "2"}, log_path=tmp_path / "web.log").start()
    user_id, cookie = make_user()
    ws = connect(server.base_url, cookie)
    try:
        wait_for_count(ws, 0, acking=True)
        with app.app_context():
            client = redis.realtime()
            assert list(registry.nodes_of(client, [user_id]).values()) == [[user_id]]
            server.kill()  # kill -9: no goodbye, no unregister
            started = time.monotonic()
            wait_for(lambda: registry.nodes_of(client, [user_id]) == {}, 10, "the dead node's entries to expire")
            assert time.monotonic() - started <= 2 + 2  # the TTL, plus the key's one-second expiry slack
    finally:
        close_quietly(ws)
