"""The /ws handshake: refused (plain HTTP 403, no upgrade) unless signed in and same-origin."""

from __future__ import annotations

import pytest
from simple_websocket import ConnectionError as HandshakeError

from app.links import origin_of
from app.realtime.views import origin_allowed
from tests.realtime.helpers import close_quietly, connect, frame_count, server_thread, session_cookie, session_data
from tests.support.waiting import free_port

pytestmark = pytest.mark.committed


def refused_status(base_url, cookie, origin="same") -> int:
    with pytest.raises(HandshakeError) as refused:
        connect(base_url, cookie, origin)
    return refused.value.status_code


def test_signed_in_same_origin_is_accepted_and_gets_the_count(live_server, make_user):
    _, cookie = make_user()
    ws = connect(live_server.base_url, cookie)
    try:
        assert frame_count(ws.receive(timeout=3)) == 0
    finally:
        close_quietly(ws)


def test_foreign_origin_is_refused_even_with_a_valid_session(live_server, make_user):
    _, cookie = make_user()
    assert refused_status(live_server.base_url, cookie, "https://evil.example") == 403
    # Same host, other port or scheme is another origin too.
    other_port = live_server.base_url.rsplit(":", 1)[0] + ":1"
    assert refused_status(live_server.base_url, cookie, other_port) == 403
    assert refused_status(live_server.base_url, cookie, "null") == 403


def test_missing_origin_is_refused(live_server, make_user):
    _, cookie = make_user()
    assert refused_status(live_server.base_url, cookie, origin=None) == 403


def test_no_session_is_refused(live_server):
    assert refused_status(live_server.base_url, None) == 403


def test_signed_out_session_is_refused(live_server, make_user):
    """The cookie a browser holds after signing out (a real logout, then the login page) is refused."""
    user_id, _ = make_user()
    client = live_server.test_client()
    with client.session_transaction() as sess:
        sess.update(session_data(user_id))
    inbox = client.get("/inbox")
    assert inbox.status_code == 200
    token = inbox.get_data(as_text=True).split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    assert client.post("/logout", data={"csrf_token": token}).status_code == 302
    assert client.get("/login").status_code == 200  # the signed-out session now holds only a CSRF token
    signed_out = client.get_cookie("session").value
    assert refused_status(live_server.base_url, signed_out) == 403


def test_session_without_user_or_for_a_deleted_user_is_refused(live_server):
    assert refused_status(live_server.base_url, session_cookie(live_server, None)) == 403
    assert refused_status(live_server.base_url, session_cookie(live_server, 987654321)) == 403


def test_forged_cookie_is_refused(live_server, make_user):
    user_id, _ = make_user()
    other_app = type(live_server)(__name__)
    other_app.secret_key = "not-our-secret"
    assert refused_status(live_server.base_url, session_cookie(other_app, user_id)) == 403


def test_plain_get_is_a_bad_request(live_server):
    response = live_server.test_client().get("/ws", headers={"Origin": live_server.base_url})
    assert response.status_code == 400


def test_allow_listed_origin_is_accepted(make_user):
    user_id, _ = make_user()
    with server_thread(free_port(), WS_ALLOWED_ORIGINS=["https://app.example.com"]) as server:
        cookie = session_cookie(server.app, user_id)
        ws = connect(server.base_url, cookie, origin="https://app.example.com")
        try:
            assert frame_count(ws.receive(timeout=3)) == 0
        finally:
            close_quietly(ws)
        assert refused_status(server.base_url, cookie, "https://other.example.com") == 403


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://Hato.Example.com/", "https://hato.example.com"),
        ("https://hato.example.com:443/app", "https://hato.example.com"),
        ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
        ("http://[::1]:8080/x", "http://[::1]:8080"),
        ("not a url", ""),
    ],
)
def test_origin_of_normalises(url, origin):
    assert origin_of(url) == origin


def test_origin_allowed_reads_base_url_and_allow_list(app):
    saved = {key: app.config[key] for key in ("BASE_URL", "WS_ALLOWED_ORIGINS")}
    with app.test_request_context():
        app.config.update(BASE_URL="https://hato.example.com/app", WS_ALLOWED_ORIGINS=["https://a.example.com:8443"])
        try:
            assert origin_allowed("https://hato.example.com")
            assert origin_allowed("https://a.example.com:8443")
            assert not origin_allowed("https://a.example.com")
            assert not origin_allowed("http://hato.example.com")
            assert not origin_allowed(None)
        finally:
            app.config.update(saved)
