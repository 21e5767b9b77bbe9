"""Rate-limit storage: Redis, with the counter's expiry read in the same round trip as the hit.

Flask-Limiter answers every limited request with RateLimit-* headers. With the stock Redis storage
that costs three round trips per request (the hit, then GET and TTL for the headers): about a
millisecond of a one-recipient ingest. Here the hit's Lua script also returns the key's PTTL, and
the headers read what this thread's last hit on that key returned, if it was just now. The counting
itself is the stock fixed-window script, so limits mean exactly what they did.

The storage is the realtime store (REALTIME_REDIS_URL, app/extensions.py): a Redis, or a Redis Cluster
(`hato+redis+cluster://`, HitAwareRedisClusterStorage), where every script of limits touches one key or
keys with one hash tag (its sliding window's `{key}`), so each runs on one node.
"""

from __future__ import annotations

import threading
import time

from limits.storage import RedisStorage, Storage
from redis.exceptions import RedisClusterException, RedisError

from app.clusterclient import LazyCluster

SCHEME_PREFIX = "hato+"
# How long a hit's answer may stand in for a read of the same key: within one request only.
FRESH_SECONDS = 1.0

INCR_EXPIRE_PTTL = """
local amount = tonumber(ARGV[2])
local current = redis.call("incrby", KEYS[1], amount)
if tonumber(current) == amount then
    redis.call("expire", KEYS[1], ARGV[1])
end
return {current, redis.call("pttl", KEYS[1])}
"""


class HitAwareRedisStorage(RedisStorage):
    """RedisStorage (`hato+redis://`, `hato+redis+unix://`) whose reads after a hit need no round trip."""

    STORAGE_SCHEME = [SCHEME_PREFIX + "redis", SCHEME_PREFIX + "rediss", SCHEME_PREFIX + "redis+unix"]

    def __init__(self, uri: str, **options) -> None:
        self._last_hit = threading.local()
        self.uri = uri  # which Redis it counts in (app/api/ratelimit.py asks: is it the realtime store?)
        super().__init__(uri.removeprefix(SCHEME_PREFIX), **options)

    def initialize_storage(self, uri: str) -> None:
        """Register the stock scripts and the hit-with-expiry one."""
        super().initialize_storage(uri)
        self.lua_incr_expire_pttl = self.get_connection().register_script(INCR_EXPIRE_PTTL)

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Count a hit; remember the new count and when the window ends for this thread's next reads."""
        current, pttl = self.lua_incr_expire_pttl([self.prefixed_key(key)], [expiry, amount])
        now = time.time()
        self._last_hit.value = (key, int(current), now + max(int(pttl), 0) / 1000, time.monotonic())
        return int(current)

    def _recent_hit(self, key: str) -> tuple | None:
        last = getattr(self._last_hit, "value", None)
        if last is not None and last[0] == key and time.monotonic() - last[3] < FRESH_SECONDS:
            return last
        return None

    def get(self, key: str) -> int:
        """The counter, from this thread's hit just now if there was one."""
        recent = self._recent_hit(key)
        return recent[1] if recent is not None else super().get(key)

    def get_expiry(self, key: str) -> float:
        """When the window ends (epoch seconds), from this thread's hit just now if there was one."""
        recent = self._recent_hit(key)
        return recent[2] if recent is not None else super().get_expiry(key)

    def clear(self, key: str) -> None:
        """Reset the counter (and forget this thread's hit on it)."""
        self._last_hit.value = None
        super().clear(key)

    def reset(self) -> int | None:
        """Clear every limit (and forget this thread's last hit)."""
        self._last_hit.value = None
        return super().reset()


class HitAwareRedisClusterStorage(HitAwareRedisStorage):
    """HitAwareRedisStorage on a Redis Cluster (`hato+redis+cluster://host:port`, any node), connected on first use.

    limits' own cluster storage connects when made, i.e. in create_app: every web process and CLI command would
    then fail to start while the cluster is away, where a plain Redis is only needed once a limit is counted.
    """

    STORAGE_SCHEME = [SCHEME_PREFIX + "redis+cluster", SCHEME_PREFIX + "rediss+cluster"]

    def __init__(self, uri: str, key_prefix: str = RedisStorage.PREFIX, wrap_exceptions: bool = False, **options):
        self._last_hit = threading.local()
        self.uri = uri
        scheme, rest = uri.removeprefix(SCHEME_PREFIX).split("://", 1)
        # RedisStorage.__init__ would make a plain client: set up what it sets, with the stand-in instead.
        Storage.__init__(self, uri, wrap_exceptions=wrap_exceptions, **options)
        self.key_prefix = key_prefix
        self.target_server = "redis"
        self.dependency = self.dependencies["redis"].module
        self.storage = LazyCluster(f"{scheme.removesuffix('+cluster')}://{rest}", **options)
        self.initialize_storage(uri)

    @property
    def base_exceptions(self) -> tuple[type[Exception], ...]:
        """What Flask-Limiter falls back to memory on: RedisError, and a cluster's RedisClusterException
        (a slot left uncovered mid-failover), which is not one."""
        return (RedisError, RedisClusterException)

    def reset(self) -> int | None:
        """Clear every limit: each master's keys under the prefix, one DEL each (one node's keys span slots)."""
        self._last_hit.value = None
        cluster, count = self.storage.client(), 0
        for primary in cluster.get_primaries():
            node = cluster.get_redis_connection(primary)
            pipe = node.pipeline(transaction=False)
            for key in node.scan_iter(match=self.prefixed_key("*"), count=1000):
                pipe.delete(key)
            count += sum(pipe.execute())
        return count
