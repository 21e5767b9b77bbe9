"""Breakers, token buckets and rate limits on a real Redis Cluster (the realtime store), through a failover.

Six Debian redis-server processes (tests/support/redis_cluster.py): one cluster for the module, and one of
its own for the failover test, which kills a master. Skipped when redis-server / redis-cli are missing.
"""

from __future__ import annotations

import time
import uuid

import flask
import pytest
import redis as redis_lib
from limits import parse
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter, SlidingWindowCounterRateLimiter
from redis.exceptions import RedisClusterException

from app import create_app, keyspace
from app.api import ratelimit
from app.auth import throttle
from app.clusterclient import connect, seed_nodes
from app.extensions import is_cluster, limiter, limiter_storage_uri, redis
from app.providers import TransientError
from app.providers.breaker import CircuitBreaker, Settings, evalsha_on, snapshot, state_key
from app.providers.fake import FakeProvider
from app.providers.ratelimit import Limit, TokenBucket
from app.providers.routing import ROUTE_RECHECK_SECONDS, Router
from app.providers.status import breaker_states
from app.ratelimit_storage import HitAwareRedisClusterStorage
from jobs.delivery import deliver_batch
from tests.conftest import TEST_CONFIG
from tests.support.redis_cluster import RedisCluster, missing_binaries
from tests.support.waiting import free_port, wait_for

pytestmark = pytest.mark.skipif(
    bool(missing_binaries()),
    reason=f"{', '.join(missing_binaries())} not installed: a Redis Cluster needs Debian's redis-server",
)

SETTINGS = Settings(failures=3, window=10.0, cooldown=30.0, probe_timeout=5.0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with RedisCluster(tmp_path_factory.mktemp("redis-cluster")) as running:
        yield running


@pytest.fixture
def store(cluster):
    """The app's own kind of cluster client (app/clusterclient.py connect), on an empty cluster."""
    client = connect(cluster.url)
    yield client
    client.flushall()  # every master
    client.close()


@pytest.fixture
def realtime_on_cluster(app, cluster, monkeypatch):
    """The session app with its realtime store on the cluster (RQ and the rest stay on REDIS_URL)."""
    monkeypatch.setitem(app.config, "REALTIME_REDIS_URL", cluster.url)
    monkeypatch.setitem(app.config, "REALTIME_REDIS_CLUSTER", True)
    yield
    client = redis._clients.pop(("cluster", cluster.url), None)  # the handle's cached client: this cluster goes
    if client is not None:
        client.flushall()
        client.close()


def slot(cluster, key: str) -> int:
    return cluster.nodes[0].client().execute_command("CLUSTER KEYSLOT", key)


def fake(name: str) -> FakeProvider:
    provider = FakeProvider()
    provider.name = name
    return provider


def test_the_keys_of_each_script_share_one_slot(app, cluster, store):
    with app.app_context():
        for name, scope in (("smtp", None), ("webpush", "fcm.googleapis.com:443"), ("slack", "T0/C1}{odd")):
            breaker = CircuitBreaker(store, name, SETTINGS, scope=scope)
            label = name if scope is None else f"{name}:{scope}"
            bucket = TokenBucket(store, label, Limit(1, 1))
            assert breaker.keys[0] == state_key(label) and breaker.keys[0].startswith(keyspace.tagged(label))
            # One slot for the breaker's two keys and the bucket's two: a router's allow + take go to one node.
            assert len({slot(cluster, key) for key in (*breaker.keys, *bucket.keys)}) == 1
        assert slot(cluster, state_key("smtp")) != slot(cluster, state_key("smtp_fallback"))  # spread by name


def test_a_breaker_opens_half_opens_and_closes_on_the_cluster(app, store):
    clock = Clock()
    with app.app_context():
        name = f"c-{uuid.uuid4().hex[:8]}"
        breaker = CircuitBreaker(store, name, SETTINGS, clock)
        for _ in range(3):
            assert breaker.allow().allowed
            breaker.failure()
        assert breaker.state() == "open" and not breaker.allow().allowed
        clock.now += 30
        assert breaker.allow().allowed and breaker.state() == "half_open"  # the one probe
        assert not breaker.allow().allowed  # nobody else while it probes
        breaker.failure()
        assert breaker.state() == "open"
        clock.now += 30
        assert breaker.allow().allowed
        breaker.success()
        assert breaker.state() == "closed" and breaker.allow().closed
        states, counts = snapshot(store)  # the registry set and the counters, on other slots
        assert states[name] == "closed"
        assert counts[(name, "closed", "open")] == 1 and counts[(name, "half_open", "open")] == 1
        assert counts[(name, "open", "half_open")] == 2 and counts[(name, "half_open", "closed")] == 1


def test_a_bucket_limits_and_pauses_on_the_cluster(app, store):
    with app.app_context():
        bucket = TokenBucket(store, f"b-{uuid.uuid4().hex[:8]}", Limit(rate=0.5, burst=3))
        assert [bucket.take() for _ in range(3)] == [0.0, 0.0, 0.0]
        assert 1.5 < bucket.take() <= 2.0  # the next token in 2 s at 0.5/s, nothing taken
        paused = TokenBucket(store, f"p-{uuid.uuid4().hex[:8]}", None)
        assert paused.take() == 0.0  # no rate: only a pause holds it back
        paused.pause(30)
        paused.pause(1)  # never shortens a pause
        assert 29 < paused.take() <= 30


def test_pipelined_scripts_go_to_the_nodes_of_their_slots(app, cluster, store):
    with app.app_context():
        names = ["smtp", "smtp_fallback", "fcm", "apns", "twilio", "vonage"]
        first = names[0]
        other = next(n for n in names if cluster.master_of(state_key(n)) is not cluster.master_of(state_key(first)))
        breakers = [CircuitBreaker(store, n, SETTINGS, Clock()) for n in (first, other)]
        buckets = [TokenBucket(store, n, Limit(1, 1)) for n in (first, other)]
        for each in breakers:
            each.load_scripts()
        buckets[0].load_script()
        pipe = store.pipeline(transaction=False)  # a ClusterPipeline: two nodes, one write each, then the reads
        breakers[0].allow_on(pipe)
        buckets[0].take_on(pipe)
        breakers[1].success_on(pipe)
        buckets[1].take_on(pipe)
        allow, take, success, second_take = pipe.execute()
        assert breakers[0].permit(allow).allowed and take == 0 and success in (b"", "") and second_take == 0
        crossed = store.pipeline()
        evalsha_on(crossed, breakers[0]._success.sha, [breakers[0].keys[0], breakers[1].keys[0]], [])
        with pytest.raises(RedisClusterException, match="same key slot"):  # one script's keys: one slot
            crossed.execute()


def test_routing_on_the_cluster_loads_scripts_the_masters_forgot(app, store):
    primary, backup = fake("c_primary"), fake("c_backup")
    clock, settings = Clock(), Settings.from_config(app.config)
    with app.app_context():
        router = Router([primary, backup], app.config, store, clock=clock, sleep=lambda s: None)
        store.script_flush()  # every master forgets them (as a replica promoted to master never had them)
        assert router.route().provider is primary
        for _ in range(settings.failures):
            router.report(primary, "transient")
        clock.now += ROUTE_RECHECK_SECONDS
        assert router.route().provider is backup  # the primary's breaker opened on the cluster
        router.report(backup, "sent")  # owed: rides on the next route's pipeline
        clock.now += settings.cooldown
        store.script_flush()
        assert router.route().provider is primary  # the probe, with the backup's success in one pipeline
        assert CircuitBreaker(store, "c_primary", settings, clock).state() == "half_open"
        assert is_cluster(router.client)


def test_the_rate_limit_storage_counts_on_the_cluster(cluster):
    storage = storage_from_string(limiter_storage_uri(cluster.url, cluster=True), key_prefix="hato-test-limits")
    assert isinstance(storage, HitAwareRedisClusterStorage)
    try:
        fixed, limit = FixedWindowRateLimiter(storage), parse("3 per minute")
        assert [fixed.hit(limit, "user", "1") for _ in range(4)] == [True, True, True, False]
        stats = fixed.get_window_stats(limit, "user", "1")
        assert stats.remaining == 0 and 55 < stats.reset_time - time.time() <= 60
        sliding = SlidingWindowCounterRateLimiter(storage)  # two keys per counter, with limits' own hash tag
        assert [sliding.hit(limit, "user", "2") for _ in range(4)] == [True, True, True, False]
        moving = MovingWindowRateLimiter(storage)
        assert [moving.hit(limit, "user", "3") for _ in range(4)] == [True, True, True, False]
        assert storage.check()
        assert storage.reset() >= 3  # keys on several masters, one DEL each
        assert fixed.hit(limit, "user", "1")
    finally:
        storage.reset()


def test_a_client_seeded_with_a_dead_node_first_reaches_the_cluster_through_the_next(cluster):
    # What a process restarted during a failover meets when its first seed is the master that died.
    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(redis_lib.ConnectionError, match="unavailable"):
        connect(f"redis://{dead}/0")
    client = connect(f"redis://{dead},{cluster.nodes[1].address}/0")
    client.set("hato-test:seeds", "reached")
    assert client.get("hato-test:seeds") == b"reached"
    client.close()
    storage = storage_from_string(limiter_storage_uri(f"redis://{dead},{cluster.nodes[1].address}/0", cluster=True),
                                  key_prefix="hato-test-seeds")  # fmt: skip
    assert FixedWindowRateLimiter(storage).hit(parse("2/minute"), "seeded")


def test_seed_nodes_keep_the_password_and_the_database_on_the_first_url():
    first, others = seed_nodes("rediss://:pw@h1:7000, h2:7001 ,h3/0?ssl_cert_reqs=none")
    assert first == "rediss://:pw@h1:7000/0?ssl_cert_reqs=none"
    assert [(node.host, node.port) for node in others] == [("h2", 7001), ("h3", 6379)]
    assert seed_nodes("redis://h1:7000/0") == ("redis://h1:7000/0", [])


def test_an_app_on_the_cluster_counts_its_per_user_limits_there(app, cluster, store):
    other = create_app(dict(TEST_CONFIG, REALTIME_REDIS_URL=cluster.url, REALTIME_REDIS_CLUSTER=True))
    assert other.config["RATELIMIT_STORAGE_URI"].startswith("hato+redis+cluster://127.0.0.1:")
    assert isinstance(limiter.storage, HitAwareRedisClusterStorage)  # (the conftest restores the main app's)
    with other.test_request_context("/login", method="POST", data={"email": "alice@example.com"}):
        throttle.note_failure()  # the per-account sign-in ceiling and the failed-address mark
    keys = [k.decode() for node in store.get_primaries() for k in store.get_redis_connection(node).keys("*")]
    assert any("login-account/alice@example.com" in k for k in keys), keys
    assert any("login-failed-client" in k for k in keys), keys
    with app.app_context():
        assert not [k for k in redis.client().keys("*") if b"login" in k]  # nothing on REDIS_URL


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_the_engine_keeps_breakers_in_the_realtime_store(
    app, cluster, realtime_on_cluster, fake_provider, make_delivery, monkeypatch
):
    monkeypatch.setitem(app.config, "BREAKER_FAILURES", 3)
    deliveries = [make_delivery() for _ in range(5)]
    fake_provider.fail_next(TransientError("connection refused", kind="refused"), times=10)

    counts = deliver_batch("email", [d.id for d in deliveries])

    assert counts["pending"] == 3 and counts["waiting"] == 2  # three failures opened the breaker
    assert is_cluster(redis.realtime())
    assert CircuitBreaker(redis.realtime(), "fake", Settings.from_config(app.config)).state() == "open"
    assert breaker_states(["fake"]) == {"fake": "open"}  # what the console shows, from the cluster
    assert not [k for k in redis.client().keys("*") if b"breaker" in k or b"bucket" in k]  # REDIS_URL has none


def test_breakers_and_buckets_keep_working_after_a_master_fails_over(app, tmp_path):
    clock, settings = Clock(), Settings.from_config(app.config)
    with RedisCluster(tmp_path / "failover") as failing, app.app_context():
        client = connect(failing.url)
        breaker = CircuitBreaker(client, "smtp", settings, clock)
        bucket = TokenBucket(client, "smtp", Limit(rate=0.01, burst=2))  # its tag: on the breaker's master
        for _ in range(settings.failures):
            breaker.failure()
        assert [bucket.take(), bucket.take()] == [0.0, 0.0]
        master = failing.master_of(breaker.keys[0])
        replica = failing.replica_of(master)
        # A provider with a closed breaker on the same master (its router has no state to lose).
        bystander = next(n for n in (f"p{i}" for i in range(200)) if failing.master_of(state_key(n)) is master)
        failing.wait_replicated(master, replica)  # the replica has the state (replication is asynchronous)

        failing.kill(master)
        router = Router([fake(bystander)], app.config, client, clock=clock, sleep=lambda s: None)
        assert router.route().provider.name == bystander  # failed open, or answered by the new master: no error
        failing.wait_promoted(replica)

        # The client finds the new master itself (a failed connect reloads the slot map); the state survived. Until
        # every node agrees on the new map (a moment on a busy machine) a read fails open and says "closed".
        seen: list[tuple[str, object]] = []  # what the client and the promoted node answered: the evidence on a timeout

        def read_open() -> bool:
            seen.append((breaker.state(), replica.client().hget(breaker.keys[0], "state")))
            return seen[-1][0] == "open"

        try:
            wait_for(read_open, 15, "the breaker's state read from the promoted master")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; (client, promoted node) read: {sorted(set(seen))} ×{len(seen)}") from None
        assert not breaker.allow().allowed
        assert bucket.take() > 0  # the two tokens stay taken
        clock.now += settings.cooldown
        # The promoted replica never had the scripts: the router's pipeline meets NOSCRIPT and loads them.
        smtp = fake("smtp")
        route = Router([smtp], app.config, client, clock=clock, sleep=lambda s: None).route()
        assert route.provider is smtp and breaker.state() == "half_open"  # the probe
        breaker.success()
        assert breaker.state() == "closed" and failing.master_of(breaker.keys[0]) is replica
        client.close()


def test_on_the_cluster_the_api_limit_is_counted_at_once_not_with_the_quotas(app, cluster, store):
    """Its keys carry no hash tag, so the quotas' script (one slot) cannot take them: the guard counts them."""
    other = create_app(dict(TEST_CONFIG, REALTIME_REDIS_URL=cluster.url, REALTIME_REDIS_CLUSTER=True))
    with other.test_request_context("/v1/notifications", method="POST"):
        ratelimit.defer("api-key:cluster-test")
        assert ratelimit.take_deferred() is None and flask.request.hato_rate_limit.remaining > 0
    keys = [k.decode() for node in store.get_primaries() for k in store.get_redis_connection(node).keys("*")]
    assert any("api-key:cluster-test/api/" in k for k in keys), keys
