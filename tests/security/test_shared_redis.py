"""Attack: staging shares production's Redis server (another db number); its user 42 sees production's toasts.

Redis pub/sub ignores the database number, so without a namespace in every name staging's sockets hear
production's badge events, titles included. On one database number the two would also share queues,
buckets, breakers and presence (the sweeper lock lives in PostgreSQL). Two installations below, one Redis server.
"""

from __future__ import annotations

import pytest
import redis as redis_lib

from app import create_app, keyspace
from app.extensions import redis
from app.live import presence
from app.live.publish import publish_badge, publish_broadcast
from app.providers.breaker import CircuitBreaker, Settings
from app.providers.ratelimit import TokenBucket
from app.queueing import enqueue_deliveries, get_queue
from tests.conftest import TEST_CONFIG
from tests.support.redis_watch import RedisWatch

PRODUCTION_URL = "postgresql://postgres@127.0.0.1:5432/hato"
STAGING_URL = "postgresql://postgres@127.0.0.1:5432/hato_staging"


def _installation(database_url: str, redis_url: str):
    namespace = keyspace.derive_namespace(database_url)
    return create_app(dict(TEST_CONFIG, DATABASE_URL=database_url, REDIS_URL=redis_url, REDIS_NAMESPACE=namespace))


@pytest.fixture
def production(redis_url):
    return _installation(PRODUCTION_URL, redis_url)


@pytest.fixture
def staging(redis_url):
    """Staging on the same Redis server, another database number (as the attack has it)."""
    other_db = redis_lib.Redis.from_url(redis_url).connection_pool.connection_kwargs["db"] ^ 1
    url = redis_url.rsplit("/", 1)[0] + f"/{other_db}"
    app = _installation(STAGING_URL, url)
    yield app
    with app.app_context():
        for key in redis.client().scan_iter(match=keyspace.key("*")):
            redis.client().delete(key)


def _listen(app):
    """A node of that installation holding user 42's tab, subscribed as its web processes are (app/realtime)."""
    with app.app_context():
        return RedisWatch(users=[42])


def _heard(watch, seconds: float = 0.5) -> list[tuple[str, dict]]:
    got = []
    while (event := watch.next_event(timeout=seconds)) is not None:
        got.append(event)
    return got


def test_the_two_installations_have_different_namespaces(production, staging):
    assert production.config["REDIS_NAMESPACE"] != staging.config["REDIS_NAMESPACE"]
    assert production.config["REDIS_NAMESPACE"].startswith("hato-")


def test_staging_user_42_never_hears_productions_toast(production, staging):
    production_ears, staging_ears = _listen(production), _listen(staging)
    with production.app_context():
        assert publish_badge([42], toast={"title": "Your salary statement for November"})
        assert publish_broadcast()
    heard_by_production = _heard(production_ears)
    assert [payload.get("toast", {}).get("title") for _, payload in heard_by_production] == [
        "Your salary statement for November",
        None,
    ]
    assert _heard(staging_ears) == []
    # And the other way round.
    with staging.app_context():
        publish_badge([42], toast={"title": "staging test"})
    assert _heard(production_ears) == []
    assert [p["toast"]["title"] for _, p in _heard(staging_ears)] == ["staging test"]


def test_on_one_database_number_queues_buckets_breakers_and_presence_are_apart(production, redis_url):
    same_db = _installation(STAGING_URL, redis_url)  # even the same db number
    with production.app_context():
        assert enqueue_deliveries("high", "email", [1, 2, 3])
        CircuitBreaker(redis.client(), "smtp", Settings(failures=1)).failure()
        TokenBucket(redis.client(), "smtp", None).pause(60)
        presence.touch(redis.client(), [42], 60)
        production_jobs = get_queue("high").count
    with same_db.app_context():
        assert get_queue("high").count == 0
        assert CircuitBreaker(redis.client(), "smtp", Settings(failures=1)).state() == "closed"
        assert TokenBucket(redis.client(), "smtp", None).take() == 0
        assert presence.online_user_ids([42]) == set()
    assert production_jobs == 1
    with production.app_context():
        for key in redis.client().scan_iter(match=keyspace.key("*")):
            redis.client().delete(key)
        get_queue("high").empty()


def test_every_key_an_installation_writes_carries_its_namespace(production, redis_url):
    client = redis_lib.Redis.from_url(redis_url)
    before = set(client.keys("*"))
    with production.app_context():
        enqueue_deliveries("default", "email", [7])
        CircuitBreaker(redis.client(), "smtp", Settings(failures=1)).failure()
        TokenBucket(redis.client(), "smtp", None).pause(1)
        presence.touch(redis.client(), [1], 60)
        namespace = production.config["REDIS_NAMESPACE"].encode()
    # RQ's own index of queue names (`rq:queues`) is one set per Redis database by design; the names in it
    # are namespaced, so it tells installations nothing about each other's work.
    written = set(client.keys("*")) - before - {b"rq:queues"}
    assert written
    assert [k for k in written if namespace not in k] == []
    with production.app_context():
        get_queue("default").empty()
        for key in written:
            client.delete(key)
