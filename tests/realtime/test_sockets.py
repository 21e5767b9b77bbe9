"""Live sockets against a real server: counts on connect and after events, toasts, presence, liveness."""

from __future__ import annotations

import base64
import os
import socket
import threading
import time

import pytest
import sqlalchemy as sa

from app.extensions import db, redis
from app.live.presence import online_user_ids, presence_key
from app.live.publish import publish_badge, publish_broadcast
from app.realtime.connection import SharedReaderThread
from app.realtime.hub import DEFAULTS, hub_for
from tests.realtime.helpers import (
    close_quietly,
    connect,
    frame_count,
    insert_notification,
    server_thread,
    session_cookie,
    wait_for_count,
)
from tests.support.waiting import free_port, wait_for

pytestmark = pytest.mark.committed

SOCK_OPTIONS = DEFAULTS["SOCK_SERVER_OPTIONS"]


@pytest.fixture
def sockets():
    """Collect client sockets and close them after the test."""
    opened = []
    yield opened
    for ws in opened:
        close_quietly(ws)


def open_socket(sockets, base_url, cookie):
    ws = connect(base_url, cookie)
    sockets.append(ws)
    return ws


def test_an_event_reaches_every_tab_of_that_user_only_within_a_second(live_server, make_user, sockets):
    user_id, cookie = make_user()
    _, other_cookie = make_user()
    tabs = [open_socket(sockets, live_server.base_url, cookie) for _ in range(2)]
    other = open_socket(sockets, live_server.base_url, other_cookie)
    for ws in (*tabs, other):
        wait_for_count(ws, 0)
    with live_server.app_context():
        insert_notification(user_id, title="<script>alert(1)</script> deploy")
        published = time.monotonic()
        assert publish_badge([user_id], toast={"title": "<script>alert(1)</script> deploy"})
    for ws in tabs:
        frame = wait_for_count(ws, 1, timeout=1.0)
        assert time.monotonic() - published < 1.0
        assert "&lt;script&gt;alert(1)&lt;/script&gt; deploy" in frame
        assert "<script>" not in frame
        assert 'hx-swap-oob="true"' in frame
    # The other user hears nothing about it.
    late = [other.receive(timeout=0.3)]
    assert not any(frame and "deploy" in frame for frame in late)


def test_a_broadcast_makes_every_socket_recount_its_own_badge(live_server, make_user, sockets):
    first_id, first_cookie = make_user()
    _, second_cookie = make_user()
    with live_server.app_context():
        insert_notification(first_id)
    first = open_socket(sockets, live_server.base_url, first_cookie)
    second = open_socket(sockets, live_server.base_url, second_cookie)
    wait_for_count(first, 1)
    wait_for_count(second, 0)
    with live_server.app_context():
        db.session.execute(
            sa.text("INSERT INTO announcements (title, body, published_at) VALUES ('Maintenance', 'Tonight', now())")
        )
        db.session.commit()
        assert publish_broadcast()
    wait_for_count(first, 2, timeout=1.0)
    wait_for_count(second, 1, timeout=1.0)


def test_reconnecting_gets_the_authoritative_count(live_server, make_user, sockets):
    user_id, cookie = make_user()
    ws = open_socket(sockets, live_server.base_url, cookie)
    wait_for_count(ws, 0)
    close_quietly(ws)
    with live_server.app_context():
        for n in range(3):
            insert_notification(user_id, key=f"missed-{n}")  # published to nobody
    again = open_socket(sockets, live_server.base_url, cookie)
    assert frame_count(again.receive(timeout=2)) == 3


def test_idle_sockets_hold_no_database_connection(live_server, make_user, sockets):
    for _ in range(3):
        _, cookie = make_user()
        wait_for_count(open_socket(sockets, live_server.base_url, cookie), 0)
    with live_server.app_context():
        # The recounts after connecting and subscribing are over once every connection is back in the pool.
        wait_for(lambda: db.engine.pool.checkedout() == 0, 5, "the badge recounts to return their connections")
    assert hub_for(live_server).socket_count() >= 3


def test_a_user_is_present_once_their_tab_acks_and_a_tab_that_never_acks_is_not(live_server, make_user, sockets):
    with live_server.app_context():
        redis.client().delete(presence_key())  # ids restart after each committed test's TRUNCATE
    user_id, cookie = make_user()
    frozen_id, frozen_cookie = make_user()
    absent_id, _ = make_user()
    wait_for_count(open_socket(sockets, live_server.base_url, cookie), 0, acking=True)
    wait_for_count(open_socket(sockets, live_server.base_url, frozen_cookie), 0)  # open, but it never answers
    with live_server.app_context():
        wait_for(lambda: online_user_ids([user_id]) == {user_id}, 5, "the acking tab's user online")
        assert online_user_ids([user_id, frozen_id, absent_id]) == {user_id}


def test_sockets_are_closed_with_going_away_when_the_server_shuts_down(make_user):
    user_id, _ = make_user()
    with server_thread(free_port()) as server:
        ws = connect(server.base_url, session_cookie(server.app, user_id))
        wait_for_count(ws, 0)
        hub_for(server.app).shutdown()
        deadline = time.monotonic() + 3
        while ws.connected and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not ws.connected
        assert ws.close_reason == 1001


def kill_pubsub_connections(client) -> int:
    """Drop every pub/sub connection on our Redis DB (this process's listeners only: DBs are per engineer)."""
    db_number = client.connection_pool.connection_kwargs.get("db", 0)
    killed = 0
    for entry in client.client_list(_type="pubsub"):
        if int(entry["db"]) == db_number:
            killed += client.client_kill_filter(_id=entry["id"])
    return killed


def test_the_listener_resubscribes_and_resyncs_after_losing_redis(make_user):
    user_id, _ = make_user()
    with server_thread(free_port()) as server:
        hub = hub_for(server.app)
        ws = connect(server.base_url, session_cookie(server.app, user_id))
        try:
            wait_for_count(ws, 0)
            assert hub.listening.wait(3)
            with server.app.app_context():
                client = redis.client()
                deadline = time.monotonic() + 3
                while hub.listening.is_set() and time.monotonic() < deadline:
                    kill_pubsub_connections(client)
                    time.sleep(0.05)
                # Published while nobody listens: lost, so the resync after resubscribing must cover it.
                insert_notification(user_id)
                publish_badge([user_id])
            wait_for_count(ws, 1, timeout=15)
            with server.app.app_context():
                insert_notification(user_id)
                publish_badge([user_id])
            wait_for_count(ws, 2, timeout=1)
        finally:
            close_quietly(ws)


def raw_handshake(port: int, cookie: str) -> tuple[socket.socket, bytes]:
    """Complete a websocket handshake by hand, offering permessage-deflate as browsers do; return the response."""
    sock = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: http://127.0.0.1:{port}\r\n"
        f"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
        f"Cookie: session={cookie}\r\n\r\n".encode()
    )
    response = sock.recv(4096)
    assert response.startswith(b"HTTP/1.1 101")
    return sock, response


class FrameReader:
    """Reads the server's (unmasked) frames from a hand-made socket and answers its pings like a browser."""

    def __init__(self, sock: socket.socket, handshake_response: bytes, timeout: float) -> None:
        self.sock = sock
        self.buffer = handshake_response.partition(b"\r\n\r\n")[2]  # a frame may follow the 101 at once
        sock.settimeout(timeout)

    def _exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(4096)
            assert chunk, "the server closed the connection"
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def frame(self) -> tuple[int, bytes]:
        """The next frame: (opcode, payload); a ping is answered with its pong before it is returned."""
        first, second = self._exactly(2)
        length = second & 0x7F
        if length == 126:
            length = int.from_bytes(self._exactly(2), "big")
        elif length == 127:
            length = int.from_bytes(self._exactly(8), "big")
        opcode, payload = first & 0x0F, self._exactly(length)
        if opcode == 0x9:
            mask = os.urandom(4)  # clients mask every frame (RFC 6455)
            masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + mask + masked)
        return opcode, payload

    def answer_pings(self, wanted: int) -> int:
        """Read until `wanted` pings were answered; return how many were."""
        answered = 0
        while answered < wanted:
            answered += self.frame()[0] == 0x9
        return answered

    def next_text(self) -> str:
        """The next text frame's payload (answering pings on the way)."""
        while True:
            opcode, payload = self.frame()
            if opcode == 0x1:
                return payload.decode()


def test_compression_is_declined(live_server, make_user):
    """permessage-deflate would cost ~90 KB of zlib state per socket for ~300-byte frames."""
    _, cookie = make_user()
    sock, response = raw_handshake(int(live_server.base_url.rsplit(":", 1)[1]), cookie)
    try:
        headers, _, first_frame = response.partition(b"\r\n\r\n")
        assert b"sec-websocket-extensions" not in headers.lower()
        # Uncompressed: the first frame (text, FIN, not RSV1) carries the badge in plain bytes.
        first_frame += b"" if b"data-count" in first_frame else sock.recv(4096)
        assert first_frame[0] == 0x81 and b'data-count="0"' in first_frame
    finally:
        sock.close()


def test_a_client_that_stops_answering_pings_is_dropped(make_user):
    user_id, _ = make_user()
    with server_thread(free_port(), SOCK_SERVER_OPTIONS={**SOCK_OPTIONS, "ping_interval": 0.3}) as server:
        hub = hub_for(server.app)
        frozen, _ = raw_handshake(server.port, session_cookie(server.app, user_id))
        try:
            wait_for(lambda: hub.socket_count() == 1, 2, "the socket to register", interval=0.02)
            wait_for(lambda: hub.socket_count() == 0, 5, "the silent socket to be dropped", interval=0.05)
        finally:
            frozen.close()


def test_a_live_client_answers_pings_and_stays(make_user):
    user_id, _ = make_user()
    with server_thread(free_port(), SOCK_SERVER_OPTIONS={**SOCK_OPTIONS, "ping_interval": 0.2}) as server:
        sock, response = raw_handshake(server.port, session_cookie(server.app, user_id))
        try:
            frames = FrameReader(sock, response, timeout=5)
            assert frame_count(frames.next_text()) == 0  # the greeting
            assert frames.answer_pings(5) == 5  # five pings came, were answered, and the socket stays
            assert hub_for(server.app).socket_count() == 1
            with server.app.app_context():
                insert_notification(user_id)
                publish_badge([user_id])
            assert frame_count(frames.next_text()) == 1
        finally:
            sock.close()


def test_every_socket_is_read_by_the_one_shared_reader_thread(make_user):
    user_id, _ = make_user()
    with server_thread(free_port()) as server:
        cookie = session_cookie(server.app, user_id)
        tabs = [connect(server.base_url, cookie) for _ in range(7)]
        try:
            for ws in tabs:
                wait_for_count(ws, 0)
            hub = hub_for(server.app)
            with hub._cond:
                readers = [conn.ws.thread for conns in hub._conns.values() for conn in conns]
            assert len(readers) == len(tabs)
            # No thread of its own per socket: each is a handle on the process's one reader thread.
            assert all(isinstance(reader, SharedReaderThread) and reader.is_alive() for reader in readers)
            assert [t.name for t in threading.enumerate()].count("hato-realtime-reader") == 1
        finally:
            for ws in tabs:
                close_quietly(ws)
