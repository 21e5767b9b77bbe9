"""Which Redis the breakers, buckets and rate limits use (the realtime store), without a cluster running.

The cluster itself is in tests/test_realtime_store_cluster.py; here: the defaults, and a cluster that is away
failing as a RedisError (which every caller fails open on), never at start-up.
"""

from __future__ import annotations

import pytest
import redis as redis_lib
from limits.storage import storage_from_string
from redis.exceptions import RedisClusterException

from app import create_app
from app.extensions import is_cluster, limiter, limiter_storage_uri, redis
from app.providers.fake import FakeProvider
from app.providers.routing import Router
from app.ratelimit_storage import HitAwareRedisClusterStorage, HitAwareRedisStorage
from tests.conftest import TEST_CONFIG
from tests.support.waiting import free_port


def test_by_default_the_realtime_store_is_redis_url(app):
    with app.app_context():
        assert app.config["REALTIME_REDIS_URL"] == app.config["REDIS_URL"]
        assert redis.realtime() is redis.client()
    assert app.config["RATELIMIT_STORAGE_URI"] == limiter_storage_uri(app.config["REDIS_URL"])


def test_rate_limits_count_in_the_realtime_store():
    other = create_app(dict(TEST_CONFIG, REALTIME_REDIS_URL="redis://127.0.0.1:6379/9"))
    assert other.config["RATELIMIT_STORAGE_URI"] == "hato+redis://127.0.0.1:6379/9"
    assert isinstance(limiter.storage, HitAwareRedisStorage)


def test_cluster_urls_map_to_the_cluster_schemes():
    assert (
        limiter_storage_uri("redis://:pw@10.0.0.5:7000/0", cluster=True) == "hato+redis+cluster://:pw@10.0.0.5:7000/0"
    )
    assert limiter_storage_uri("rediss://10.0.0.5:7000", cluster=True) == "hato+rediss+cluster://10.0.0.5:7000"


def test_an_app_starts_while_its_cluster_is_away_and_its_calls_fail_as_redis_errors():
    dead = f"redis://127.0.0.1:{free_port()}/0"
    other = create_app(dict(TEST_CONFIG, REALTIME_REDIS_URL=dead, REALTIME_REDIS_CLUSTER=True))  # no I/O yet
    assert isinstance(limiter.storage, HitAwareRedisClusterStorage)
    with pytest.raises(redis_lib.ConnectionError):  # Flask-Limiter's in-memory fallback catches RedisError
        limiter.storage.incr("k", 60)
    assert not limiter.storage.check()
    with other.app_context():
        store = redis.realtime()  # a stand-in, as a Redis client is made without its server
        assert is_cluster(store) and ("cluster", dead) not in redis._clients  # asked again on the next call
        with pytest.raises(redis_lib.ConnectionError):
            store.get("k")
        provider = FakeProvider()
        assert Router([provider], other.config, store).route().provider is provider  # routing fails open


def test_a_cluster_storage_made_from_its_uri_waits_for_first_use():
    storage = storage_from_string(limiter_storage_uri(f"redis://127.0.0.1:{free_port()}", cluster=True))
    assert isinstance(storage, HitAwareRedisClusterStorage)
    with pytest.raises(redis_lib.ConnectionError):
        storage.get("k")


def test_routing_fails_open_on_a_cluster_error_too():
    def uncovered():
        raise RedisClusterException("slot 42 is not covered")  # mid-failover; not a RedisError

    assert Router.guard(uncovered, "fail open") == "fail open"
