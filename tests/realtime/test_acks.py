"""Client acks (app/realtime/acks.py): numbered frames, cumulative acks, one resend of the newest, then given up."""

from __future__ import annotations

import json
import re
import time

import pytest

from app.extensions import redis
from app.live import nodestats, seen
from app.realtime.acks import FrameMeta, Outbox, parse_ack, stamp
from tests.realtime.test_hub import FakeSocket, serve_in_thread, wait_until


def test_frames_are_numbered_on_the_wire():
    assert (
        stamp('<span id="inbox-badge">3</span>', 7, is_json=False) == '<!--hato:seq=7--><span id="inbox-badge">3</span>'
    )
    assert json.loads(stamp('{"type": "counts", "badge": 3}', 7, is_json=True)) == {
        "type": "counts",
        "badge": 3,
        "seq": 7,
    }
    assert stamp("", 8, is_json=False) == "<!--hato:seq=8-->" and json.loads(stamp("", 8, True))["type"] == "ping"


@pytest.mark.parametrize(
    ("message", "seq"),
    [
        ('{"type": "ack", "seq": 12}', 12),
        ('{"type":"ack","seq":0}', 0),
        ('{"type": "ack", "seq": -1}', None),
        ('{"type": "ack", "seq": "12"}', None),
        ('{"type": "auth", "token": "x"}', None),
        (b'{"type": "ack", "seq": 12}', None),
        ('{"type": "ack", "seq": ' + "9" * 40 + "}", None),  # longer than any ack
        ("hello", None),
    ],
)
def test_only_a_well_formed_ack_is_read_as_one(message, seq):
    assert parse_ack(message) == seq


def test_acks_are_cumulative_and_a_number_never_sent_acks_nothing():
    box = Outbox(timeout=5)
    for n in range(3):
        box.send(f"frame {n}", FrameMeta(notifications=(n,)), is_json=False, now=100.0)
    assert [sent.meta.notifications for sent in box.ack(2, now=100.1)] == [(0,), (1,)]
    assert box.ack(99) == [] and list(box.unacked) == [3]  # a confused or hostile client acks nothing
    assert box.last_ack == 100.1


def test_the_newest_unacked_is_resent_once_then_given_up():
    box = Outbox(timeout=5)
    box.send("old", FrameMeta(), is_json=False, now=100.0)
    box.send("new", FrameMeta(), is_json=False, now=101.0)
    assert box.due(now=104.9) == (None, [])
    resend, given_up = box.due(now=105.0)
    assert resend == "<!--hato:seq=2-->new" and given_up == []  # the newest carries the full count
    assert box.due(now=109.9) == (None, [])
    resend, given_up = box.due(now=110.0)
    assert resend is None and [sent.wire for sent in given_up] == ["<!--hato:seq=1-->old", "<!--hato:seq=2-->new"]
    assert box.unacked == {}


@pytest.fixture(autouse=True)
def _counts_stay_in_the_process(monkeypatch):
    """The stats thread would move the hub's counts to Redis while a test reads them in the process."""
    monkeypatch.setattr(nodestats, "FLUSH_SECONDS", 3600)


def listening(hub):
    """Start the hub and wait for its subscription, whose resync would otherwise send the test's socket a frame."""
    hub.ensure_started()
    assert hub.listening.wait(5)
    return hub


def test_the_hub_resends_a_frame_nobody_acked_once_and_counts_it_given_up(app, hub, monkeypatch):
    monkeypatch.setitem(app.config, "REALTIME_ACK_TIMEOUT_SECONDS", 0.5)
    ws = FakeSocket()
    conn = listening(hub).connect(81, ws)
    serve_in_thread(hub, conn)
    hub.stats.take()
    conn.push("badge-1")
    # Only the newest unacked frame is resent (a broadcast from another test's commit may have sent a newer one
    # than badge-1 meanwhile): some frame goes exactly twice, none three times.
    assert wait_until(lambda: numbered(ws, "badge-1") is not None, 5)
    assert wait_until(lambda: max(ws.sent.count(w) for w in set(ws.sent)) == 2, 5)  # sent, then resent once
    assert wait_until(lambda: hub.stats.take().get("unacked", 0) >= 1, 5)
    time.sleep(0.5)
    assert max(ws.sent.count(w) for w in set(ws.sent)) == 2  # never a third time
    ws.connected = False
    ws.event.set()


def numbered(ws, pattern: str) -> int | None:
    """The sequence number of the first frame sent whose body (after the number) matches pattern."""
    for frame in list(ws.sent):
        match = re.fullmatch(r"<!--hato:seq=(\d+)-->" + pattern, frame)
        if match:
            return int(match.group(1))
    return None


def test_an_ack_records_the_notifications_shown_and_the_time_from_the_202(app, hub, monkeypatch):
    ws = FakeSocket()
    conn = hub.connect(82, ws)
    serve_in_thread(hub, conn)
    hub.stats.take()
    conn.push("new row", FrameMeta(notifications=(501, 502), accepted_at=time.time() - 0.05))
    assert wait_until(lambda: numbered(ws, "new row") is not None)
    ws.inbox.append(json.dumps({"type": "ack", "seq": numbered(ws, "new row")}))
    ws.event.set()
    with app.app_context():
        assert wait_until(
            lambda: seen.acked(redis.realtime(), [(82, 501), (82, 502), (82, 503)]) == {(82, 501), (82, 502)}
        )
    counted = hub.stats.take()
    assert counted["acks"] >= 1 and counted["ack_count"] == 1  # one frame came with the 202's time
    assert 0.05 <= counted["ack_sum"] < 2 and counted["ack_le_0.1"] == 1
    ws.connected = False
    ws.event.set()


def test_a_quiet_socket_is_pinged_on_its_own_timer_and_an_unanswered_ping_is_resent_once(app, hub, monkeypatch):
    monkeypatch.setitem(app.config, "PRESENCE_TTL_SECONDS", 0.6)  # a ping after 0.1-0.2 s of quiet
    monkeypatch.setitem(app.config, "REALTIME_ACK_TIMEOUT_SECONDS", 0.2)
    ws = FakeSocket()
    conn = listening(hub).connect(83, ws)
    assert 0.1 <= conn.outbox.ping_at - conn.opened <= 0.2  # spread: sockets opened together ping apart
    serve_in_thread(hub, conn)
    hub.stats.take()
    assert wait_until(lambda: numbered(ws, "") is not None, 2)  # a ping: a number and nothing else
    ws.inbox.append(json.dumps({"type": "ack", "seq": max(conn.outbox.next_seq - 1, 1)}))
    ws.event.set()
    assert wait_until(lambda: conn.outbox.last_ack is not None, 2)
    pings = lambda: sum(bool(re.fullmatch(r"<!--hato:seq=\d+-->", f)) for f in list(ws.sent))  # noqa: E731
    assert wait_until(lambda: pings() >= 4, 3)  # the next ping, unanswered, its one resend, then given up
    ws.connected = False
    ws.event.set()
