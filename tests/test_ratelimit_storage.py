"""The rate-limit storage: stock fixed-window counting, headers read from the hit's own round trip."""

from __future__ import annotations

import threading
import time

import pytest
from limits import parse
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter

from app import ratelimit_storage
from app.extensions import limiter_storage_uri
from tests.support.redisserver import RedisServer


@pytest.fixture
def storage(app):
    storage = storage_from_string(limiter_storage_uri(app.config["REDIS_URL"]), key_prefix="hato-test-limits")
    assert isinstance(storage, ratelimit_storage.HitAwareRedisStorage)
    storage.reset()
    yield storage
    storage.reset()


def test_unix_socket_urls_map_to_the_unix_scheme():
    assert limiter_storage_uri("unix:///tmp/redis.sock?db=2") == "hato+redis+unix:///tmp/redis.sock?db=2"
    assert limiter_storage_uri("redis://127.0.0.1:6379/3") == "hato+redis://127.0.0.1:6379/3"


def test_a_fixed_window_limit_counts_and_reports_as_the_stock_storage_does(storage):
    limiter, limit = FixedWindowRateLimiter(storage), parse("3 per minute")
    assert [limiter.hit(limit, "k") for _ in range(4)] == [True, True, True, False]
    stats = limiter.get_window_stats(limit, "k")
    assert stats.remaining == 0
    assert 55 < stats.reset_time - time.time() <= 60


def test_reads_right_after_a_hit_use_its_answer_and_other_threads_ask_redis(storage):
    assert storage.incr("k", 60) == 1
    storage.get_connection().set(storage.prefixed_key("k"), 42)  # changed behind this thread's back
    assert storage.get("k") == 1
    seen = []
    other = threading.Thread(target=lambda: seen.append(storage.get("k")))
    other.start()
    other.join()
    assert seen == [42]


def test_an_old_hit_is_not_trusted(storage, monkeypatch):
    storage.incr("k", 60)
    storage.get_connection().set(storage.prefixed_key("k"), 42)
    monkeypatch.setattr(ratelimit_storage, "FRESH_SECONDS", 0.0)
    assert storage.get("k") == 42
    assert storage.get_expiry("k") <= time.time() + 1  # SET dropped the TTL: the window is over


def test_clear_forgets_the_hit(storage):
    storage.incr("k", 60)
    storage.clear("k")
    assert storage.get("k") == 0


def test_redis_down_is_an_error_for_the_fallback_and_a_restarted_empty_redis_counts_afresh(tmp_path):
    """Flask-Limiter switches to its in-memory fallback on a storage error, so the error must surface;
    after an empty restart the hit's Lua script is loaded again and counting starts from zero."""
    server = RedisServer(tmp_path / "redis").start()
    storage = storage_from_string(limiter_storage_uri(server.url), key_prefix="hato-test-limits")
    limiter, limit = FixedWindowRateLimiter(storage), parse("3 per minute")
    try:
        assert limiter.hit(limit, "k") and limiter.hit(limit, "k")
        server.stop()
        with pytest.raises(Exception) as raised:
            limiter.hit(limit, "k")
        assert isinstance(raised.value, storage.base_exceptions)
        assert storage.check() is False
        server.start()
        assert storage.check() is True
        assert [limiter.hit(limit, "k") for _ in range(4)] == [True, True, True, False]
    finally:
        server.stop()
