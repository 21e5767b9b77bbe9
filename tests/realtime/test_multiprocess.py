"""Two real gunicorn web processes: API calls and mark-read on one reach sockets on the other; SIGTERM -> 1001."""

from __future__ import annotations

import secrets
import time
import urllib.request

import pytest
from itsdangerous import URLSafeTimedSerializer

from app.extensions import db
from tests.factories import UserFactory
from tests.realtime.helpers import (
    Gunicorn,
    api_notify,
    close_quietly,
    connect,
    create_api_key,
    insert_notification,
    session_cookie,
    session_data,
    wait_for_count,
    wait_until_listening,
)
from tests.support.waiting import free_port

pytestmark = pytest.mark.committed


def signed_in(app, user_id: int) -> tuple[str, str]:
    """Return (session cookie, X-CSRFToken) for a signed-in browser session of user_id."""
    raw = secrets.token_hex(20)
    cookie = app.session_interface.get_signing_serializer(app).dumps(session_data(user_id, csrf_token=raw))
    return cookie, URLSafeTimedSerializer(app.secret_key, salt="wtf-csrf-token").dumps(raw)


def post(base_url: str, path: str, cookie: str, token: str) -> int:
    request = urllib.request.Request(
        base_url + path,
        data=b"",
        method="POST",
        headers={"Cookie": f"session={cookie}", "X-CSRFToken": token, "HX-Request": "true", "Origin": base_url},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status


def new_user_with_notifications(app, count: int) -> tuple[int, list[int], str]:
    with app.app_context():
        user = UserFactory()
        db.session.commit()
        ids = [insert_notification(user.id, key=f"mp-{n}") for n in range(count)]
        user_id, external_id = user.id, user.external_id
        db.session.remove()
    return user_id, ids, external_id


def test_a_socket_on_one_process_hears_an_api_call_made_to_the_other(app, two_processes):
    first, second = two_processes
    user_id, _, external_id = new_user_with_notifications(app, 1)
    key = create_api_key(app)
    ws = connect(first.base_url, session_cookie(app, user_id))
    try:
        wait_for_count(ws, 1)
        wait_until_listening(app, user_id)
        started = time.monotonic()
        api_notify(second.base_url, key, external_id, "Deploy <b>finished</b>")
        frame = wait_for_count(ws, 2, timeout=1.0)
        assert time.monotonic() - started < 1.0
        assert "Deploy &lt;b&gt;finished&lt;/b&gt;" in frame
    finally:
        close_quietly(ws)


def test_a_socket_on_one_process_follows_a_mark_read_on_the_other(app, two_processes):
    first, second = two_processes
    user_id, notification_ids, _ = new_user_with_notifications(app, 2)
    ws = connect(first.base_url, session_cookie(app, user_id))
    try:
        wait_for_count(ws, 2)
        cookie, token = signed_in(app, user_id)
        started = time.monotonic()
        assert post(second.base_url, f"/inbox/notifications/{notification_ids[0]}/read", cookie, token) == 200
        wait_for_count(ws, 1, timeout=1.0)
        assert time.monotonic() - started < 1.0
        assert post(second.base_url, "/inbox/read-all", cookie, token) == 200
        wait_for_count(ws, 0, timeout=1.0)
    finally:
        close_quietly(ws)


def test_sigterm_closes_sockets_with_going_away_and_the_worker_exits_promptly(app):
    user_id, _, _ = new_user_with_notifications(app, 1)
    server = Gunicorn(free_port()).start()
    try:
        sockets = [connect(server.base_url, session_cookie(app, user_id)) for _ in range(3)]
        for ws in sockets:
            wait_for_count(ws, 1)
        started = time.monotonic()
        server.proc.send_signal(15)
        deadline = started + 4
        while any(ws.connected for ws in sockets) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [ws.close_reason for ws in sockets] == [1001, 1001, 1001]
        assert server.proc.wait(10) == 0
        # Well inside the 5 s graceful timeout: no socket held the worker open.
        assert time.monotonic() - started < 4.5
    finally:
        server.kill()
