"""The feed socket /v1/feed/socket: user token in the first message, Origin from FEED_ALLOWED_ORIGINS, JSON
counts, expiry closing with 4401 (fetch a new token), a fresh token over the socket, the per-user cap."""

from __future__ import annotations

import json
import time

import jwt
import pytest
import sqlalchemy as sa
from simple_websocket import Client, ConnectionClosed
from simple_websocket import ConnectionError as HandshakeError

from app import user_tokens
from app.api_keys.service import create_api_key, key_prefix
from app.extensions import db
from app.live.publish import publish_badge
from app.realtime.connection import CLOSE_TOKEN_EXPIRED, CLOSE_TOKEN_REFUSED
from tests.realtime.helpers import close_quietly, insert_notification, server_thread
from tests.support.waiting import free_port

pytestmark = pytest.mark.committed

HOST = "https://product.example"


@pytest.fixture(scope="module")
def server(app):
    with server_thread(free_port(), FEED_ALLOWED_ORIGINS=[HOST], WS_MAX_SOCKETS_PER_USER=3) as running:
        yield running


@pytest.fixture
def member(server):
    """A committed member and a committed key with feed:issue; yields (user id, external id, key prefix)."""
    with server.app.app_context():
        external_id = f"sock-{time.monotonic_ns()}"
        user_id = db.session.execute(
            sa.text("INSERT INTO users (email, external_id, role, password_hash) VALUES (:e, :x, 'member', '') "
                    "RETURNING id"),
            {"e": f"{external_id}@example.com", "x": external_id},
        ).scalar_one()  # fmt: skip
        key = create_api_key(None, "socket tests", ["feed:issue"])
        db.session.commit()
        db.session.remove()
    return user_id, external_id, key_prefix(key)


def token_for(server, external_id: str, prefix: str, expires_in: float = 300, aud: str | None = None) -> str:
    with server.app.app_context():
        secret = user_tokens.signing_secret(prefix)
        claims = {"sub": external_id, "aud": aud or user_tokens.audience(), "exp": int(time.time() + expires_in)}
    return jwt.encode(claims, secret, algorithm="HS256", headers={"kid": prefix})


def open_socket(server, origin: str | None = HOST) -> Client:
    headers = {"Origin": origin} if origin else {}
    return Client.connect(server.base_url.replace("http://", "ws://") + "/v1/feed/socket", headers=headers)


def authed(server, token: str) -> Client:
    ws = open_socket(server)
    ws.send(json.dumps({"type": "auth", "token": token}))
    return ws


def next_frame(ws: Client, timeout: float = 3.0, acking: bool = True) -> dict:
    """The next frame (pings skipped), acked as the bell does, without its sequence number."""
    deadline = time.monotonic() + timeout
    while True:
        frame = ws.receive(timeout=max(0.01, deadline - time.monotonic()))
        assert frame is not None, "no frame in time"
        decoded = json.loads(frame)
        seq = decoded.pop("seq", None)
        assert type(seq) is int, f"a frame without its sequence number: {frame}"
        if acking:
            ws.send(json.dumps({"type": "ack", "seq": seq}))
        if decoded.get("type") != "ping":
            return decoded


def wait_for(ws: Client, predicate, timeout: float = 3.0) -> dict:
    """Return the first frame within timeout that predicate accepts (a resync may come first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        frame = next_frame(ws, max(0.01, deadline - time.monotonic()))
        if predicate(frame):
            return frame
    raise AssertionError("no matching frame in time")


def close_code(ws: Client, timeout: float = 5.0) -> int:
    """Read until the server closes the socket; return its close code."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ws.receive(timeout=0.2)
    except ConnectionClosed as closed:
        return closed.reason
    raise AssertionError("the socket is still open")


def test_a_valid_token_gets_the_counts_as_json_and_live_updates(server, member):
    user_id, external_id, prefix = member
    ws = authed(server, token_for(server, external_id, prefix))
    try:
        assert next_frame(ws) == {"type": "counts", "unread": 0, "unseen": 0, "badge": 0}
        with server.app.app_context():
            insert_notification(user_id, "Live one")
            publish_badge([user_id], {"title": "Live one"})
            db.session.remove()
        # (a resync as the listener subscribes may show the count a moment before the toast's frame)
        frame = wait_for(ws, lambda f: f["unread"] == 1 and "toasts" in f)
        assert frame["toasts"] == [{"title": "Live one"}] and frame["badge"] == 1
    finally:
        close_quietly(ws)


@pytest.mark.parametrize("origin", ["https://evil.example", None, "null"])
def test_an_origin_outside_feed_allowed_origins_is_refused_before_the_upgrade(server, origin):
    with pytest.raises(HandshakeError) as refused:
        open_socket(server, origin)
    assert refused.value.status_code == 403


def test_the_inbox_origin_alone_is_not_enough(server):
    with pytest.raises(HandshakeError):
        open_socket(server, server.base_url)


def test_bad_tokens_close_with_4403_and_expired_ones_with_4401(server, member):
    _, external_id, prefix = member
    assert close_code(authed(server, "not-a-token")) == CLOSE_TOKEN_REFUSED
    assert close_code(authed(server, token_for(server, external_id, prefix, aud="https://x.example"))) == 4403
    assert close_code(authed(server, token_for(server, external_id, prefix, expires_in=-60))) == CLOSE_TOKEN_EXPIRED
    silent = open_socket(server)
    silent.send(json.dumps({"type": "hello"}))
    assert close_code(silent) == CLOSE_TOKEN_REFUSED


def test_the_socket_closes_with_4401_when_its_token_expires(server, member):
    _, external_id, prefix = member
    started = time.monotonic()  # before the token is signed: its exp (whole seconds) is at least 1 s after this
    ws = authed(server, token_for(server, external_id, prefix, expires_in=2))
    assert next_frame(ws)["type"] == "counts"
    assert close_code(ws, timeout=6) == CLOSE_TOKEN_EXPIRED
    assert 1.0 <= time.monotonic() - started <= 5.0


def test_a_fresh_token_over_the_socket_keeps_it_open(server, member):
    _, external_id, prefix = member
    ws = authed(server, token_for(server, external_id, prefix, expires_in=2))
    try:
        assert next_frame(ws)["type"] == "counts"
        ws.send(json.dumps({"type": "auth", "token": token_for(server, external_id, prefix, expires_in=60)}))
        assert wait_for(ws, lambda f: f["type"] == "auth")["expires_at"] > time.time() + 30
        assert ws.receive(timeout=3.5) is None  # past the first token's expiry: still open, nothing to say
        assert ws.connected
    finally:
        close_quietly(ws)


def test_a_fresh_token_for_another_member_closes_the_socket(server, member):
    _, external_id, prefix = member
    with server.app.app_context():
        other = f"other-{time.monotonic_ns()}"
        db.session.execute(
            sa.text("INSERT INTO users (email, external_id, role, password_hash) VALUES (:e, :x, 'member', '')"),
            {"e": f"{other}@example.com", "x": other},
        )
        db.session.commit()
        db.session.remove()
    ws = authed(server, token_for(server, external_id, prefix))
    assert next_frame(ws)["type"] == "counts"
    ws.send(json.dumps({"type": "auth", "token": token_for(server, other, prefix)}))
    assert close_code(ws) == CLOSE_TOKEN_REFUSED


def test_feed_sockets_count_against_the_per_user_cap(server, member):
    _, external_id, prefix = member
    token = token_for(server, external_id, prefix)
    sockets = []
    try:
        for _ in range(3):
            sockets.append(authed(server, token))
            assert next_frame(sockets[-1])["type"] == "counts"
        sockets.append(authed(server, token))
        assert close_code(sockets[0]) == 4008  # the oldest goes, as with the inbox's sockets
    finally:
        for ws in sockets:
            close_quietly(ws)
