"""The hub's own logic with stand-in sockets: coalescing, dispatch, writing, shutdown."""

from __future__ import annotations

import json
import re
import threading
import time
from unittest.mock import patch

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException
from simple_websocket import ConnectionClosed
from sqlalchemy.exc import OperationalError

from app import create_app
from app.extensions import db
from app.inbox import queries
from app.live import registry
from app.live.publish import broadcast_channel
from app.realtime import hub as hub_module
from app.realtime import listener
from app.realtime.frames import parse_toast
from app.realtime.hub import MAX_TOASTS_PER_FRAME, Hub
from tests.realtime.helpers import frame_count
from tests.support.redisserver import RedisServer


class FakeSocket:
    """What the hub uses of simple_websocket.Server: event, connected, send, receive, close."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.connected = True
        self.sent: list[str] = []
        self.inbox: list[str] = []
        self.closed_with: int | None = None
        self.thread = threading.Thread(target=lambda: None)  # simple-websocket's reader, already done
        self.thread.start()

    def send(self, data: str) -> None:
        if not self.connected:
            raise ConnectionClosed()
        self.sent.append(data)

    def receive(self, timeout=None):
        if self.inbox:
            return self.inbox.pop(0)
        if not self.connected:
            raise ConnectionClosed()
        return None

    def close(self, reason=None, message=None) -> None:
        if not self.connected:
            raise ConnectionClosed()
        self.closed_with = reason
        self.connected = False


class CountingBadge:
    """Stands in for badge_counts: each call returns one more, and records who asked when."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, float]] = []
        self.lock = threading.Lock()

    def __call__(self, user_id: int) -> queries.BadgeCounts:
        with self.lock:
            self.calls.append((user_id, time.monotonic()))
            return queries.BadgeCounts(unread=len(self.calls), unseen=0)


@pytest.fixture
def counting(monkeypatch):
    badge = CountingBadge()
    monkeypatch.setattr(queries, "badge_counts", badge)
    return badge


class HandClock:
    """A clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clocked(app, monkeypatch):
    """A hub on a hand-driven clock with no flusher threads: frames go out when the test calls flush_due()."""
    monkeypatch.setitem(app.config, "REALTIME_FLUSH_THREADS", 0)
    clock = HandClock()
    hub = Hub(app, clock=clock)
    yield hub, clock
    hub.shutdown(timeout=1)


def serve_in_thread(hub, conn) -> threading.Thread:
    def serve():
        try:
            hub.serve(conn)
        finally:
            hub.disconnect(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def wait_until(predicate, timeout=3.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_a_burst_for_one_user_costs_one_count_per_window(app, clocked, counting):
    hub, clock = clocked
    ws = FakeSocket()
    conn = hub.connect(41, ws)
    hub.notify(41)
    assert hub.flush_due() == 1 and len(counting.calls) == 1  # the first event goes out at once
    counted_at = [clock()]
    for _ in range(100):  # 100 events over 0.5 s, one every 5 ms
        clock.advance(0.005)
        hub.notify(41, {"title": "burst"})
        if hub.flush_due():
            counted_at.append(clock())
    clock.advance(0.1)
    assert hub.flush_due() == 1  # the trailing window: nothing after the burst is left unsent
    counted_at.append(clock())
    # One recount per 100 ms window: the leading edge, then the first event after each window ends
    # (105, 210, 315 and 420 ms: events come every 5 ms), then the trailing window after the burst.
    assert len(counting.calls) == len(counted_at) == 6
    assert all(b - a >= 0.1 - 1e-9 for a, b in zip(counted_at, counted_at[1:], strict=False))
    conn.write_pending()
    assert frame_count(ws.sent[-1]) == len(counting.calls)
    assert ws.sent[-1].count("burst") == MAX_TOASTS_PER_FRAME  # the toasts of a window, at most five


def test_each_user_is_coalesced_separately_and_both_tabs_get_the_frame(app, clocked, counting):
    hub, clock = clocked
    tabs = [FakeSocket(), FakeSocket()]
    other = FakeSocket()
    conns = [hub.connect(51, tabs[0]), hub.connect(51, tabs[1]), hub.connect(52, other)]
    hub.notify(51, {"title": "<b>for 51</b>"})
    hub.notify(52)
    assert hub.flush_due() == 2 and len(counting.calls) == 2  # one recount per user, not per tab
    for conn in conns:
        conn.write_pending()
    frame = tabs[0].sent[-1]
    assert "&lt;b&gt;for 51&lt;/b&gt;" in frame and "<b>" not in frame
    assert 'hx-swap-oob="true"' in frame and 'id="toasts" hx-swap-oob="beforeend"' in frame
    assert tabs[0].sent[-1] == tabs[1].sent[-1]
    assert "toast" not in other.sent[-1]
    hub.notify(51)  # within 51's window: waits; 52 has its own window
    hub.notify(52)
    assert hub.flush_due() == 0
    clock.advance(0.1)
    assert hub.flush_due() == 2


def test_the_flusher_threads_deliver_frames_by_themselves(app, hub, counting):
    ws = FakeSocket()
    serve_in_thread(hub, hub.connect(53, ws))
    hub.notify(53, {"title": "hello"})
    assert wait_until(lambda: any("hello" in frame for frame in ws.sent))


def test_dispatch_reads_the_node_channel_and_the_broadcast(app, hub, monkeypatch):
    seen = []
    monkeypatch.setattr(hub, "notify", lambda user_id, toast=None, *rest: seen.append((user_id, toast, *rest)))
    monkeypatch.setattr(hub, "local_user_ids", lambda: [1, 2])
    monkeypatch.setattr(hub, "notify_all", lambda: seen.append("all"))
    node = b"node-test"
    badge = {"kind": "badge", "users": [12, "x", 14], "toast": {"title": "Hi"}, "n": {"12": [5, "y"]}, "t": 3.5}
    hub.dispatch({"type": "message", "channel": node, "data": json.dumps(badge).encode()})
    hub.dispatch(
        {"type": "message", "channel": broadcast_channel(hub.app.config).encode(), "data": b'{"kind": "badge"}'}
    )
    hub.dispatch({"type": "smessage", "channel": node, "data": b"not json"})
    hub.dispatch({"type": "smessage", "channel": node, "data": b'{"kind": "close", "user": "12"}'})
    hub.dispatch({"type": "ssubscribe", "channel": node, "data": 1})
    assert seen == [(12, {"title": "Hi"}, [5], 3.5, None), (14, {"title": "Hi"}, [], 3.5, None), "all", "all"]
    assert hub.stats.take() == {"inbound_messages": 2, "inbound_events": 2}


def test_events_for_users_without_a_local_socket_cost_nothing(app, clocked, counting):
    hub, clock = clocked
    hub.notify(999)
    clock.advance(1)
    assert hub.flush_due() == 0 and counting.calls == []


@pytest.mark.parametrize(
    ("payload", "toast"),
    [
        ({"kind": "badge"}, None),
        ({"kind": "badge", "toast": {"title": ""}}, None),
        ({"kind": "badge", "toast": "x"}, None),
        ({"kind": "badge", "toast": {"title": 5}}, {"title": "5"}),
        (["x"], None),
    ],
)
def test_parse_toast(payload, toast):
    assert parse_toast(payload) == toast


def test_serve_discards_client_messages_and_stops_when_the_client_leaves(app, hub, counting):
    ws = FakeSocket()
    ws.inbox = ["hello", "again"]
    conn = hub.connect(61, ws)
    thread = serve_in_thread(hub, conn)
    conn.push("frame-1")
    # numbered for its ack (a ping to the quiet socket may have taken a number first)
    assert wait_until(lambda: any(re.fullmatch(r"<!--hato:seq=\d+-->frame-1", f) for f in ws.sent) and not ws.inbox)
    ws.connected = False
    ws.event.set()
    thread.join(2)
    assert not thread.is_alive()
    assert hub.socket_count() == 0 and 61 not in hub.local_user_ids()


def test_shutdown_closes_every_socket_with_going_away(app, hub, counting):
    sockets = [FakeSocket() for _ in range(3)]
    conns = [hub.connect(70 + n, ws) for n, ws in enumerate(sockets)]

    def serve(conn):
        try:
            hub.serve(conn)
        finally:
            hub.disconnect(conn)

    threads = [threading.Thread(target=serve, args=(conn,), daemon=True) for conn in conns]
    for thread in threads:
        thread.start()
    hub.shutdown()
    assert [ws.closed_with for ws in sockets] == [1001, 1001, 1001]
    assert hub.socket_count() == 0
    late = FakeSocket()
    late_conn = hub.connect(80, late)
    assert late.closed_with == 1001 and late_conn in hub._conns[80]  # a process going away turns new sockets away


def test_threads_start_only_with_the_first_socket(app, counting):
    hub = Hub(app)
    try:
        assert hub._threads == []
        hub.connect(90, FakeSocket())
        assert [t.name for t in hub._threads][:1] == ["hato-realtime-listener-0"]  # one on a plain Redis
        assert len(hub._threads) == 3 + app.config["REALTIME_FLUSH_THREADS"]  # listener, heartbeat, stats, flushers
    finally:
        hub.shutdown(timeout=0.5)


def test_create_app_starts_no_realtime_threads():
    def realtime_threads():
        return {thread for thread in threading.enumerate() if thread.name.startswith("hato-realtime")}

    before = realtime_threads()
    fresh = create_app({"TESTING": True})
    try:
        assert fresh.test_client().get("/login").status_code == 200
        assert hub_module.hub_for(fresh)._threads == []
        assert not realtime_threads() - before
    finally:
        with fresh.app_context():
            db.engine.dispose()


def test_a_database_error_is_recounted_later_without_another_event(app, clocked, monkeypatch):
    hub, clock = clocked
    down = [True]

    def badge_counts(user_id):
        if down[0]:
            raise OperationalError("SELECT badge", {}, Exception("connection refused"))
        return queries.BadgeCounts(unread=3, unseen=0)

    monkeypatch.setattr(queries, "badge_counts", badge_counts)
    ws = FakeSocket()
    conn = hub.connect(96, ws)
    hub.notify(96, toast={"id": 1, "title": "Hello"})
    assert hub.flush_due() == 1
    clock.advance(hub_module.RECOUNT_RETRY_SECONDS / 2)
    # Not at once: the database gets a moment (and the log one line per try). The hub's own listener may still
    # recount everyone here when its subscription lands late (a full suite on 2 CPUs): that count fails too.
    hub.flush_due()
    clock.advance(hub_module.RECOUNT_RETRY_SECONDS)
    assert hub.flush_due() == 1  # still down: tried, and scheduled again
    down[0] = False  # the failover is over
    clock.advance(hub_module.RECOUNT_RETRY_SECONDS)
    assert hub.flush_due() == 1
    conn.write_pending()
    assert [frame_count(frame) for frame in ws.sent] == [3]
    assert "Hello" in ws.sent[0]  # the toast it was to show came along


def test_a_database_error_drops_the_batch_and_the_flusher_carries_on(app, clocked, monkeypatch):
    hub, clock = clocked
    calls = []

    def database_down(user_id):
        calls.append(user_id)
        raise OperationalError("SELECT badge", {}, Exception("connection refused"))

    monkeypatch.setattr(queries, "badge_counts", database_down)
    ws = FakeSocket()
    conn = hub.connect(95, ws)
    hub.notify(95)
    assert hub.flush_due() == 1 and calls == [95]
    conn.write_pending()
    assert ws.sent == []  # nothing counted, nothing sent
    monkeypatch.setattr(queries, "badge_counts", lambda user_id: queries.BadgeCounts(unread=7, unseen=0))
    clock.advance(0.1)  # past the coalescing window
    hub.notify(95)  # joins the recount already scheduled after the failure
    clock.advance(hub_module.RECOUNT_RETRY_SECONDS)
    assert hub.flush_due() == 1
    conn.write_pending()
    assert [frame_count(frame) for frame in ws.sent] == [7]


def test_a_socket_opened_while_the_store_was_away_is_registered_once_it_is_back(app, tmp_path, monkeypatch):
    server = RedisServer(tmp_path / "redis")  # not started: the realtime store is away
    monkeypatch.setitem(app.config, "REALTIME_REDIS_URL", server.url)
    hub = Hub(app)
    try:
        conn = hub.connect(91, FakeSocket())
        assert conn.socket_id is None  # capped per process meanwhile, and no event can be routed to it
        server.start()
        assert wait_until(lambda: conn.socket_id is not None, 10)  # the heartbeat's next pass registers it
        with app.app_context():
            assert registry.nodes_of(server.client(), [91], app.config) == {hub.node_id: [91]}
    finally:
        hub.shutdown(timeout=1)
        server.stop()


def test_the_listener_lives_on_while_no_cluster_node_answers():
    """A cluster whose every seed is down makes store() itself raise, and a master dying mid-read can surface as
    a ValueError; the listener must keep trying, or its process's sockets would hear nothing again once the
    cluster is back (the soak found both)."""
    tries, stopping, heard = [], threading.Event(), []

    def store():
        if len(tries) < 3:
            raise RedisClusterException("Redis Cluster cannot be connected")
        return object()  # back: a client with no slot map to refresh

    def opener():
        tries.append(time.monotonic())
        if len(tries) == 2:
            raise ValueError("I/O operation on closed file.")  # redis-py's reader on a socket closed under it
        if len(tries) < 4:
            raise RedisConnectionError("Connection refused")
        stopping.set()
        return _Silent()

    thread = threading.Thread(target=listener.listen, args=(store, opener, heard.append, stopping, lambda: None))
    with patch.object(listener, "RETRY_MAX_SECONDS", 0.05), patch.object(listener, "RETRY_FIRST_SECONDS", 0.01):
        thread.start()
        thread.join(10)
    assert not thread.is_alive() and len(tries) == 4  # it subscribed again once the store answered


class _Silent:
    def get_message(self, timeout):
        return None

    def close(self):
        pass
