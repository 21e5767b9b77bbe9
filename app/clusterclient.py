"""Redis Cluster clients that fail as a Redis client does: with a RedisError when used, never when made.

A RedisCluster asks a node for the slot map when it is made, and raises RedisClusterException (not a
RedisError) when no node answers. A Redis client only connects when used. So that every caller's
`except RedisError` (routing and rate limits fail open) holds for both, connect() turns that failure into
ConnectionError, and LazyCluster stands in for a cluster client until one can be made.
"""

from __future__ import annotations

import threading

import redis as redis_lib
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import RedisClusterException

# As app/extensions.py's Redis clients. After a failover nothing else is needed: a command to the dead master
# fails to connect, the client reloads the slot map from a live node and tries again (3 times, no pause, in
# redis-py 6.4), so calls fail fast while the replica is promoted and work again once it is.
OPTIONS = {"socket_timeout": 5, "socket_connect_timeout": 2, "health_check_interval": 30}


def connect(url: str, **options) -> RedisCluster:
    """A RedisCluster client seeded by url (any node); ConnectionError when no node answers."""
    try:
        return RedisCluster.from_url(url, **{**OPTIONS, **options})
    except RedisClusterException as exc:
        raise redis_lib.ConnectionError(f"Redis Cluster at {url!r} unavailable: {exc}") from exc


class LazyCluster:
    """Stands in for a RedisCluster client and makes it on first use (and again on each use until it is made).

    Scripts can be registered before: their sha needs no connection.
    """

    def __init__(self, url: str, **options) -> None:
        self.url, self._options = url, options
        self._client: RedisCluster | None = None
        self._lock = threading.Lock()
        self._encoder = redis_lib.Redis().get_encoder()  # utf-8, as RedisCluster's; a Redis() connects on use only

    def client(self) -> RedisCluster:
        """The RedisCluster client, made now if need be (ConnectionError when no node answers)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = connect(self.url, **self._options)
        return self._client

    def get_encoder(self):
        """The encoder a registered script hashes itself with."""
        return self._encoder

    def register_script(self, script: str) -> Script:
        """A script run through this stand-in (so on the cluster, once it is made)."""
        return Script(self, script)

    def __getattr__(self, name: str):
        return getattr(self.client(), name)
