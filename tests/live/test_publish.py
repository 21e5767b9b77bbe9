"""Badge events: one PUBLISH per user on their channel, a toast title at most, False when Redis is down."""

from __future__ import annotations

import json
import time

import pytest

from app import keyspace
from app.extensions import redis
from app.live import publish
from app.live.publish import broadcast_channel, publish_badge, publish_broadcast, user_channel


@pytest.fixture
def listener(app):
    """A pattern subscription on every badge channel of the test Redis database."""
    with app.app_context():
        pubsub = redis.client().pubsub()
    pubsub.psubscribe(keyspace.key("badge", "*"))
    assert pubsub.get_message(timeout=1)["type"] == "psubscribe"
    yield pubsub
    pubsub.close()


def received(pubsub, expected: int, timeout: float = 2.0) -> list[tuple[str, dict]]:
    messages = []
    deadline = time.monotonic() + timeout
    while len(messages) < expected and time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.1)
        if message and message["type"] == "pmessage":
            messages.append((message["channel"].decode(), json.loads(message["data"])))
    return messages


def test_publish_badge_sends_one_message_per_distinct_user(app, listener):
    with app.app_context():
        assert publish_badge([3, 2, 3], toast={"title": "Build failed", "body": "ignored"}) is True
    messages = received(listener, 2)
    assert sorted(channel for channel, _ in messages) == [user_channel(2), user_channel(3)]
    assert all(payload == {"kind": "badge", "toast": {"title": "Build failed"}} for _, payload in messages)


def test_publish_badge_without_toast_and_in_chunks(app, listener, monkeypatch):
    monkeypatch.setattr(publish, "PIPELINE_CHUNK", 2)
    with app.app_context():
        assert publish_badge(range(1, 6)) is True
    messages = received(listener, 5)
    assert [channel for channel, _ in messages] == [user_channel(n) for n in range(1, 6)]
    assert all(payload == {"kind": "badge"} for _, payload in messages)


def test_toast_titles_are_capped(app, listener):
    with app.app_context():
        publish_badge([7], toast={"title": "x" * 1000})
    [(_, payload)] = received(listener, 1)
    assert len(payload["toast"]["title"]) == publish.TOAST_TITLE_MAX


def test_publish_broadcast_uses_the_broadcast_channel(app, listener):
    with app.app_context():
        assert publish_broadcast() is True
    assert received(listener, 1) == [(broadcast_channel(), {"kind": "badge"})]


def test_redis_down_returns_false_and_raises_nothing(app):
    with app.app_context():
        saved = app.config["REDIS_URL"]
        app.config["REDIS_URL"] = "redis://127.0.0.1:1/10"
        try:
            assert publish_badge([1]) is False
            assert publish_broadcast() is False
        finally:
            app.config["REDIS_URL"] = saved
