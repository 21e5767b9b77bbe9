"""Redis Cluster clients that fail as a Redis client does: with a RedisError when used, never when made.

A RedisCluster asks a node for the slot map when it is made, and raises RedisClusterException (not a
RedisError) when no node answers. A Redis client only connects when used. So that every caller's
`except RedisError` (routing and rate limits fail open) holds for both, connect() turns that failure into
ConnectionError, and LazyCluster stands in for a cluster client until one can be made.
"""

from __future__ import annotations

import threading

import redis as redis_lib
from redis.cluster import ClusterNode, RedisCluster
from redis.commands.core import Script
from redis.exceptions import RedisClusterException

# As app/extensions.py's Redis clients. After a failover nothing else is needed: a command to the dead master
# fails to connect, the client reloads the slot map from a live node and tries again (3 times, no pause, in
# redis-py 6.4), so calls fail fast while the replica is promoted and work again once it is.
OPTIONS = {"socket_timeout": 5, "socket_connect_timeout": 2, "health_check_interval": 30}


def connect(url: str, **options) -> RedisCluster:
    """A RedisCluster client seeded by url (any node, or several); ConnectionError when no node answers."""
    first, others = seed_nodes(url)
    seeds = {"startup_nodes": others} if others else {}
    try:
        return RedisCluster.from_url(first, **{**OPTIONS, **options, **seeds})
    except RedisClusterException as exc:
        raise redis_lib.ConnectionError(f"Redis Cluster at {redact(url)!r} unavailable: {exc}") from exc


def seed_nodes(url: str) -> tuple[str, list[ClusterNode]]:
    """Split a URL naming several nodes (redis://:pw@h1:7000,h2:7001/0) into the first node's URL and the others.

    A client is made by asking one seed node for the slot map. With one seed, a process that starts (or
    restarts) while that node is down cannot reach the cluster at all; with several it asks the next.
    Hosts are names or IPv4 addresses; a host without a port is on 6379.
    """
    scheme, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    auth, at, hosts = netloc.rpartition("@")
    first, *others = [host.strip() for host in hosts.split(",") if host.strip()] or [hosts]
    nodes = []
    for other in others:
        host, colon, port = other.rpartition(":")
        nodes.append(ClusterNode(host, int(port)) if colon else ClusterNode(other, 6379))
    return f"{scheme}{sep}{auth}{at}{first}{slash}{tail}", nodes


def redact(url: str) -> str:
    """url without its password (for messages)."""
    scheme, sep, rest = url.partition("://")
    auth, at, hosts = rest.partition("/")[0].rpartition("@")
    return url if not at else url.replace(f"{auth}@", f"{auth.partition(':')[0]}:***@", 1)


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
