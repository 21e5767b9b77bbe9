"""The node's subscriptions: its own channel and the broadcast channel, on a Redis or a Redis Cluster.

On a plain Redis one pub/sub connection holds both (PUBLISH/SUBSCRIBE). On a cluster the node channel is
sharded (SSUBSCRIBE on the shard that owns its slot, so a node's events cross only that shard) and the
broadcast is classic pub/sub (heard on any node through the cluster bus), each on its own connection and
thread: redis-py cannot wait on both at once. No pattern subscription is left anywhere (PUBSUB NUMPAT 0).
After losing Redis (or a failover moved the slot) the loop subscribes again; the hub then resyncs every
local user, since whatever was published meanwhile is lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from app.extensions import REALTIME_ERRORS, is_cluster

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0
# Doubling up to a cap short enough that sockets resync within about that long of Redis coming back.
RETRY_FIRST_SECONDS = 0.5
RETRY_MAX_SECONDS = 2.0


def subscriptions(store: Callable[[], object], node_channel: str, broadcast_channel: str) -> list[Callable[[], object]]:
    """Return one opener per connection the node needs; each asks store() for the client and subscribes.

    store() is asked on every (re)subscribe: while a cluster is unreachable it hands out a stand-in, and the
    next attempt must reach the real one.
    """
    if not is_cluster(store()):

        def both():
            pubsub = store().pubsub()
            pubsub.subscribe(node_channel, broadcast_channel)
            return pubsub

        return [both]

    def sharded():
        client = store()
        pubsub = client.get_redis_connection(client.get_node_from_key(node_channel)).pubsub()
        pubsub.ssubscribe(node_channel)
        return pubsub

    def broadcast():
        client = store()
        pubsub = client.get_redis_connection(client.get_random_node()).pubsub()
        pubsub.subscribe(broadcast_channel)
        return pubsub

    return [sharded, broadcast]


def listen(
    store: Callable[[], object],
    opener: Callable[[], object],
    on_message: Callable[[dict], None],
    stopping: threading.Event,
    on_lost: Callable[[], None],
) -> None:
    """Subscribe with opener and hand every message to on_message until stopping; resubscribe after a loss."""
    backoff = RETRY_FIRST_SECONDS
    while not stopping.is_set():
        pubsub = None
        try:
            pubsub = opener()
            backoff = RETRY_FIRST_SECONDS
            while not stopping.is_set():
                message = pubsub.get_message(timeout=POLL_SECONDS)
                if message:
                    on_message(message)
        except Exception as exc:  # noqa: BLE001  # whatever breaks, subscribe again: a dead listener is silent for good
            # Besides RedisError and OSError, a socket closed under redis-py's reader raises ValueError ("I/O
            # operation on closed file") when a cluster master dies mid-read (the soak found it).
            on_lost()
            known = isinstance(exc, (*REALTIME_ERRORS, OSError))
            log.log(logging.WARNING if known else logging.ERROR, "realtime listener lost Redis, retrying in %.1fs: %s",
                    backoff, exc, exc_info=not known)  # fmt: skip
            _refresh_slots(store)
            stopping.wait(backoff)
            backoff = min(backoff * 2, RETRY_MAX_SECONDS)
        finally:
            if pubsub is not None:
                try:
                    pubsub.close()
                except Exception:  # noqa: BLE001, S110  # a connection already broken any way: nothing to close
                    pass


def _refresh_slots(store: Callable[[], object]) -> None:
    """Re-read a cluster's slot map (a failover promoted a replica: the channel's shard moved).

    Never raises: while no node answers, store() (or a stand-in's attribute) raises too, and the listener must
    live on to subscribe again once one does. A listener thread that died here would leave its process's
    sockets without events for good.
    """
    try:
        nodes = getattr(store(), "nodes_manager", None)
        if nodes is not None:
            nodes.initialize()
    except Exception as exc:  # noqa: BLE001  # as the listener's own handler: any failure here only means "not yet"
        log.warning("cluster slot map not refreshed yet: %s", exc)
