"""Presence: a sorted set of last heartbeats; online_user_ids keeps only fresh ones."""

from __future__ import annotations

import time

import pytest

from app.extensions import redis
from app.live import presence
from app.live.presence import online_user_ids, presence_key, touch


@pytest.fixture
def client(app):
    with app.app_context():
        client = redis.client()
    client.delete(presence_key())
    yield client
    client.delete(presence_key())


def test_touched_users_are_online_until_the_ttl_passes(app, client):
    now = time.time()
    touch(client, [1, 2], ttl=60, now=now - 90)  # stale heartbeats
    touch(client, [2, 3], ttl=60, now=now)
    with app.app_context():
        assert online_user_ids([1, 2, 3, 4]) == {2, 3}
        assert online_user_ids([]) == set()


def test_touch_prunes_old_heartbeats_and_sets_an_expiry(client):
    now = time.time()
    client.zadd(presence_key(), {"9": now - 500})
    touch(client, [1], ttl=60, now=now)
    assert client.zrange(presence_key(), 0, -1) == [b"1"]
    assert 0 < client.ttl(presence_key()) <= 61


def test_online_user_ids_handles_many_ids_in_chunks(app, client, monkeypatch):
    monkeypatch.setattr(presence, "CHUNK", 7)
    touch(client, range(0, 50, 2), ttl=60)
    with app.app_context():
        assert online_user_ids(range(50)) == set(range(0, 50, 2))


def test_redis_down_means_nobody_is_online(app):
    with app.app_context():
        saved = app.config["REDIS_URL"]
        app.config["REDIS_URL"] = "redis://127.0.0.1:1/10"
        try:
            assert online_user_ids([1, 2]) == set()
        finally:
            app.config["REDIS_URL"] = saved
