"""Per-process realtime counters (inbound events, frames, acks, resends, churn, 202-to-ack times), kept in Redis.

/metrics is answered by whichever process takes the scrape (app/ops/metrics.py), so a counter in process
memory would be a fraction of the truth. Each web process (node) adds its deltas to one hash of its own
every FLUSH_SECONDS; the scrape reads the hashes of the live nodes (app/live/registry.py), labelled by node.
A node's hash outlives it by KEEP_SECONDS, so a crash's last figures are still scraped for a while.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import redis as redis_lib

from app import keyspace

FLUSH_SECONDS = 2.0
KEEP_SECONDS = 600
# The 202-to-ack histogram's buckets (seconds): the seed's budget is 2 s end to end, the target 100 ms.
ACK_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
COUNTERS = (
    "inbound_messages",  # node-channel messages received
    "inbound_events",  # user events in them (a message names many users)
    "frames",  # frames sent that change what a member sees (greetings and pings not counted)
    "acks",  # of those frames, acked
    "resends",
    "unacked",  # given up after the resend
    "connects",
    "disconnects",
)


def stats_key(node_id: str, config: Mapping | None = None) -> str:
    """Return the hash of one node's counters."""
    return keyspace.key("realtime", "stats", node_id, config=config)


class NodeStats:
    """This process's counters since the last flush (thread-safe), and the socket count to report."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._delta: dict[str, float] = {}

    def add(self, name: str, amount: float = 1) -> None:
        """Count amount more of name."""
        with self._lock:
            self._delta[name] = self._delta.get(name, 0) + amount

    def observe_ack(self, seconds: float) -> None:
        """Count one 202-to-ack time into the histogram."""
        with self._lock:
            delta = self._delta
            for bound in ACK_BUCKETS:
                if seconds <= bound:
                    delta[f"ack_le_{bound}"] = delta.get(f"ack_le_{bound}", 0) + 1
            delta["ack_count"] = delta.get("ack_count", 0) + 1
            delta["ack_sum"] = delta.get("ack_sum", 0.0) + seconds

    def take(self) -> dict[str, float]:
        """Return the counts since the last take, and start again."""
        with self._lock:
            delta, self._delta = self._delta, {}
        return delta

    def flush(self, client: redis_lib.Redis, node_id: str, sockets: int, config: Mapping | None = None) -> None:
        """Add the deltas to node_id's hash (raises RedisError; the deltas are then kept for the next try)."""
        delta = self.take()
        key = stats_key(node_id, config)
        try:
            with client.pipeline(transaction=False) as pipe:
                for name, amount in delta.items():
                    if float(amount).is_integer():
                        pipe.hincrby(key, name, int(amount))
                    else:
                        pipe.hincrbyfloat(key, name, amount)
                pipe.hset(key, "sockets", sockets)
                pipe.expire(key, KEEP_SECONDS)
                pipe.execute()
        except Exception:
            with self._lock:  # put them back: counters must not lose what a Redis hiccup interrupted
                for name, amount in delta.items():
                    self._delta[name] = self._delta.get(name, 0) + amount
            raise


def read(client: redis_lib.Redis, node_ids: list[str], config: Mapping | None = None) -> dict[str, dict[str, float]]:
    """Return node id -> its counters (names as in COUNTERS, ack_le_*, ack_count, ack_sum, sockets)."""
    with client.pipeline(transaction=False) as pipe:
        for node_id in node_ids:
            pipe.hgetall(stats_key(node_id, config))
        replies = pipe.execute()
    found = {}
    for node_id, raw in zip(node_ids, replies, strict=True):
        values = {
            (k.decode() if isinstance(k, bytes) else k): float(v.decode() if isinstance(v, bytes) else v)
            for k, v in raw.items()
        }
        if values:
            found[node_id] = values
    return found
