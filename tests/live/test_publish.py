"""Routed badge events: one lookup for a batch, one message per node naming its users, none for the offline."""

from __future__ import annotations

import pytest

from app.extensions import redis
from app.live import publish, registry
from app.live.publish import publish_badge, publish_broadcast, publish_close, publish_session_end, route_badge
from tests.support.redis_watch import RedisWatch


@pytest.fixture
def nodes(app):
    """Two stand-in nodes: A holds users 1-3, B holds 3 and 4 (user 3 has a tab on each)."""
    with app.app_context():
        a, b = RedisWatch(users=(1, 2, 3)), RedisWatch(users=(3, 4))
    yield a, b
    with app.app_context():
        a.close()
        b.close()


def drain(node: RedisWatch) -> list[dict]:
    messages = []
    while (message := node.next_message(timeout=0.3)) is not None:
        messages.append(message)
    return messages


def test_each_node_gets_one_message_naming_only_its_users(app, nodes):
    a, b = nodes
    with app.app_context():
        reached = route_badge([4, 3, 2, 3, 99], toast={"title": "Build failed", "body": "ignored"}, accepted_at=12.5)
    assert reached == {2, 3, 4}  # 99 has no socket anywhere: nothing was published for them
    [to_a] = drain(a)
    [to_b] = drain(b)
    assert to_a == {"kind": "badge", "users": [2, 3], "toast": {"title": "Build failed"}, "t": 12.5}
    assert to_b == {"kind": "badge", "users": [3, 4], "toast": {"title": "Build failed"}, "t": 12.5}


def test_the_notifications_shown_travel_per_user_for_the_ack(app, nodes):
    a, _ = nodes
    with app.app_context():
        route_badge([1, 2], notifications={1: [10, 11], 2: []}, trace="00-" + "a" * 32 + "-" + "b" * 16 + "-01")
    [message] = drain(a)
    assert message["n"] == {"1": [10, 11]} and message["tp"].startswith("00-aaaa")


def test_a_node_with_many_users_gets_them_in_chunks(app, nodes, monkeypatch):
    a, _ = nodes
    monkeypatch.setattr(publish, "NODE_MESSAGE_USERS", 2)
    with app.app_context():
        assert publish_badge([1, 2, 3]) is True
    assert [m["users"] for m in drain(a)] == [[1, 2], [3]]


def test_the_broadcast_reaches_every_node(app, nodes):
    with app.app_context():
        assert publish_broadcast() is True
    assert all(drain(node) == [{"kind": "badge"}] for node in nodes)


def test_a_close_goes_to_the_node_named_in_the_socket_id_and_a_session_end_to_every_node_of_the_user(app, nodes):
    a, b = nodes
    b_socket = next(socket_id for user_id, socket_id in b.sockets if user_id == 3)
    with app.app_context():
        assert publish_close(3, [b_socket]) is True
        assert publish_session_end(3, sid="s1") is True
    assert drain(a) == [{"kind": "session-end", "sid": "s1", "user": 3}]
    assert drain(b) == [
        {"kind": "close", "sockets": [b_socket], "user": 3},
        {"kind": "session-end", "sid": "s1", "user": 3},
    ]


def test_the_registry_names_node_device_and_forgets_a_closed_socket(app, nodes):
    a, _ = nodes
    with app.app_context():
        client = redis.realtime()
        socket_id, evicted = registry.register(client, 7, "node-x", 8, 60, device="phone-1")
        assert evicted == [] and registry.node_of(socket_id) == "node-x"
        assert registry.socket_details(client, 7)[socket_id] == {"node": "node-x", "device": "phone-1"}
        assert registry.nodes_of(client, [7, 1, 50]) == {"node-x": [7], a.node_id: [1]}
        registry.unregister(client, 7, socket_id)
        assert registry.nodes_of(client, [7]) == {} and registry.socket_details(client, 7) == {}


def test_redis_down_returns_false_and_raises_nothing(app):
    with app.app_context():
        saved = app.config["REALTIME_REDIS_URL"]
        app.config["REALTIME_REDIS_URL"] = "redis://127.0.0.1:1/10"
        try:
            assert publish_badge([1]) is False
            assert publish_broadcast() is False
        finally:
            app.config["REALTIME_REDIS_URL"] = saved
