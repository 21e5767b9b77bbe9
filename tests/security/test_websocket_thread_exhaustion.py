"""Issue 14 item 8, the attack: one member opens socket after socket until the web processes run out of threads.

Every open /ws socket pins a gthread handler thread (and a reader thread); the connect rate limit
alone lets a member hold 120 more every minute, forever. The attacker here opens 20 sockets against
one process and against two; only WS_MAX_SOCKETS_PER_USER (8) stay open, the oldest are closed with
4008 by whichever process holds them, and another user's sockets are untouched. A signed-out
session's sockets are closed with 4001 (sign-out here or in another process, sign out everywhere),
and a copied cookie cannot reconnect after "sign out everywhere".
"""

from __future__ import annotations

import secrets
import time

import pytest
import requests
from itsdangerous import URLSafeTimedSerializer
from simple_websocket import ConnectionError as HandshakeError

from app.extensions import db, redis
from app.live.publish import publish_badge
from app.realtime.hub import hub_for
from tests.factories import UserFactory
from tests.realtime.helpers import (
    close_quietly,
    connect,
    frame_count,
    insert_notification,
    server_thread,
    session_cookie,
    session_data,
    wait_for_count,
)
from tests.support.waiting import free_port, wait_for

pytestmark = pytest.mark.committed

CAP = 8
FLOOD = 20


def new_user(app) -> int:
    with app.app_context():
        user = UserFactory()
        db.session.commit()
        user_id = user.id
        db.session.remove()
    return user_id


class Session:
    """One browser's signed-in session: its cookie, sid and a CSRF token for it."""

    def __init__(self, app, user_id: int) -> None:
        raw = secrets.token_hex(20)
        self.data = session_data(user_id, csrf_token=raw)
        self.sid = self.data["sid"]
        self.cookie = app.session_interface.get_signing_serializer(app).dumps(self.data)
        self.csrf = URLSafeTimedSerializer(app.secret_key, salt="wtf-csrf-token").dumps(raw)

    def post(self, base_url: str, path: str) -> requests.Response:
        response = requests.post(
            base_url + path,
            cookies={"session": self.cookie},
            headers={"X-CSRFToken": self.csrf, "Origin": base_url},
            allow_redirects=False,
            timeout=10,
        )
        if "session" in response.cookies:
            self.cookie = response.cookies["session"]  # a browser keeps what the server set
        return response


def open_socket(base_url: str, cookie: str):
    """Open one socket and wait for its first frame (it is counted before that frame is sent)."""
    ws = connect(base_url, cookie)
    frame = ws.receive(timeout=20)  # generous: a full suite on 2 CPUs has kept a first frame waiting 5 s
    assert frame is not None, f"no first frame: {'still open' if ws.connected else ws.close_reason}"
    frame_count(frame)
    return ws


def closed_with(ws, seconds: float = 5.0):
    wait_for(lambda: not ws.connected, seconds, "the server to close the socket", interval=0.02)
    return ws.close_reason


def still_open(ws, user_id: int, app, expected: int) -> None:
    """The socket is open and still hears this user's events."""
    assert ws.connected
    wait_for_count(ws, expected, timeout=3)


def badge_event(app, user_id: int) -> None:
    with app.app_context():
        insert_notification(user_id, key=f"exhaust-{time.monotonic_ns()}")
        publish_badge([user_id])
        db.session.remove()


def registry(app, user_id: int) -> list[str]:
    """The user's sockets as counted in Redis (imported here so the attack runs, and fails, on older code)."""
    from app.live import registry as sockets

    with app.app_context():
        return sockets.open_socket_ids(redis.realtime(), user_id, app.config)


def flood(base_urls: list[str], cookie: str, count: int = FLOOD) -> list:
    return [open_socket(base_urls[n % len(base_urls)], cookie) for n in range(count)]


def assert_only_newest_survive(socks: list, cap: int = CAP) -> None:
    wait_for(lambda: sum(ws.connected for ws in socks) <= cap, 5, f"at most {cap} sockets open", interval=0.02)
    evicted, kept = socks[:-cap], socks[-cap:]
    assert [closed_with(ws) for ws in evicted] == [4008] * len(evicted)
    assert all(ws.connected for ws in kept)


def test_twenty_sockets_on_one_process_leave_eight_open_and_the_oldest_get_4008(app, live_server):
    user_id, bystander = new_user(app), new_user(app)
    cookie = session_cookie(app, user_id)
    innocent = [open_socket(live_server.base_url, session_cookie(app, bystander)) for _ in range(3)]
    socks = flood([live_server.base_url], cookie)
    try:
        assert_only_newest_survive(socks)
        hub = hub_for(live_server)
        wait_for(lambda: len(hub.local_socket_ids().get(user_id, ())) == CAP, 5, "handler threads let go")
        assert len(registry(app, user_id)) == CAP
        badge_event(app, user_id)
        for ws in socks[-CAP:]:
            still_open(ws, user_id, app, 1)
        assert all(ws.connected for ws in innocent)
        assert len(registry(app, bystander)) == 3
    finally:
        for ws in socks + innocent:
            close_quietly(ws)
    wait_for(lambda: registry(app, user_id) == [], 5, "closed sockets to be uncounted")


def test_twenty_sockets_across_two_processes_leave_eight_open_in_total(app, two_processes):
    first, second = two_processes
    user_id, bystander = new_user(app), new_user(app)
    innocent = [open_socket(url, session_cookie(app, bystander)) for url in (first.base_url, second.base_url)]
    socks = flood([first.base_url, second.base_url], session_cookie(app, user_id))
    try:
        # Half the evictions are of sockets held by the other process: it heard the close on the user channel.
        assert_only_newest_survive(socks)
        assert len(registry(app, user_id)) == CAP
        badge_event(app, user_id)
        for ws in socks[-CAP:]:
            still_open(ws, user_id, app, 1)
        assert all(ws.connected for ws in innocent)
    finally:
        for ws in socks + innocent:
            close_quietly(ws)


def test_reconnecting_the_evicted_sockets_never_grows_past_the_cap(app, two_processes):
    first, second = two_processes
    user_id = new_user(app)
    cookie = session_cookie(app, user_id)
    socks = flood([first.base_url, second.base_url], cookie, CAP + 2)
    try:

        def capped() -> bool:
            return sum(ws.connected for ws in socks) == CAP

        for _ in range(3):  # an attacker's script reopening as many as were closed, again and again
            wait_for(capped, 5, "the cap to hold")
            socks += [open_socket(first.base_url, cookie) for _ in range(min(4, len(socks) - CAP))]
        wait_for(capped, 5, "the cap to hold")
        assert [ws.connected for ws in socks] == [False] * (len(socks) - CAP) + [True] * CAP
        assert len(registry(app, user_id)) == CAP
    finally:
        for ws in socks:
            close_quietly(ws)


def test_sign_out_closes_that_sessions_sockets_in_every_process_with_4001(app, two_processes):
    first, second = two_processes
    user_id, bystander = new_user(app), new_user(app)
    laptop, phone = Session(app, user_id), Session(app, user_id)
    laptop_socks = [open_socket(first.base_url, laptop.cookie), open_socket(second.base_url, laptop.cookie)]
    phone_sock = open_socket(first.base_url, phone.cookie)
    other = open_socket(second.base_url, session_cookie(app, bystander))
    try:
        assert laptop.post(second.base_url, "/logout").status_code == 302
        assert [closed_with(ws) for ws in laptop_socks] == [4001, 4001]
        badge_event(app, user_id)
        still_open(phone_sock, user_id, app, 1)  # the same user's other session is not signed out
        assert other.connected
        wait_for(lambda: len(registry(app, user_id)) == 1, 5, "the closed sockets to be uncounted")
    finally:
        for ws in [*laptop_socks, phone_sock, other]:
            close_quietly(ws)


def test_sign_out_everywhere_closes_other_sessions_and_a_copied_cookie_cannot_reconnect(app, two_processes):
    first, second = two_processes
    user_id = new_user(app)
    victim, elsewhere = Session(app, user_id), Session(app, user_id)
    stolen = victim.cookie  # the attacker's copy, taken before the victim acts
    thief_sock = open_socket(second.base_url, stolen)
    victim_tab = open_socket(first.base_url, victim.cookie)
    elsewhere_sock = open_socket(second.base_url, elsewhere.cookie)
    try:
        assert victim.post(first.base_url, "/logout/everywhere").status_code == 302
        assert closed_with(elsewhere_sock) == 4001
        # Same sid as the victim's tabs: they are asked to reconnect (1001), and only the re-stamped cookie can.
        assert closed_with(thief_sock) == 1001
        assert closed_with(victim_tab) == 1001
        with pytest.raises(HandshakeError) as refused:
            connect(second.base_url, stolen)
        assert refused.value.status_code == 403
        with pytest.raises(HandshakeError):
            connect(first.base_url, elsewhere.cookie)
        again = open_socket(first.base_url, victim.cookie)
        assert again.connected
        close_quietly(again)
    finally:
        for ws in (thief_sock, victim_tab, elsewhere_sock):
            close_quietly(ws)


def test_a_crashed_processs_sockets_age_out_and_live_ones_are_kept_by_heartbeats(app, redis_client):
    from app.live import registry as sockets

    user_id = new_user(app)
    with server_thread(free_port(), PRESENCE_TTL_SECONDS=1.5) as server:
        cookie = session_cookie(app, user_id)
        key = sockets.sockets_key(user_id, app.config)
        # Eight sockets a killed process never uncounted: last heartbeat long ago.
        redis_client.zadd(key, {f"{n:016d}:dead{n}@gone-node": time.time() - 3600 for n in range(CAP)})
        socks = [open_socket(server.base_url, cookie) for _ in range(CAP)]
        try:
            assert all(ws.connected for ws in socks)
            assert len(registry(app, user_id)) == CAP
            time.sleep(3.5)  # more than twice the TTL: only heartbeats keep them counted
            assert len(registry(app, user_id)) == CAP
            newest = open_socket(server.base_url, cookie)
            socks.append(newest)
            assert closed_with(socks[0]) == 4008
            assert all(ws.connected for ws in socks[1:])
        finally:
            for ws in socks:
                close_quietly(ws)
