"""The soak's faults: a kill -9 every KILL_EVERY seconds, a PostgreSQL failover at a third, a Redis master at two.

The failover is what an HA manager does (tests/support/pgcluster.py): kill -9 the primary, promote its
synchronous standby a second later, and once the old primary is repaired, rewind it and attach it as the new
primary's synchronous standby. The Redis Cluster master that dies is the one holding a breaker's slot; its
replica takes over after the node timeout. Nothing in Hato is restarted for either.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

from tests.soak.cluster import Cluster
from tests.support.pgcluster import FailoverPair
from tests.support.redis_cluster import RedisCluster

REPAIR_SECONDS = 20  # from the failover until the old primary is back as the standby


@dataclass
class Faults:
    """What happened when (seconds from the start), for the report."""

    kills: list[tuple[float, str]] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # a fault that could not be done as planned


def kill_loop(cluster: Cluster, every: float, stop: threading.Event, faults: Faults, started: float) -> None:
    """At every multiple of `every` seconds, kill -9 a random process (not a witness) and start it again."""
    while not stop.wait(max(0.0, started + (len(faults.kills) + 1) * every - time.monotonic())):
        name = random.choice(cluster.killable)
        faults.kills.append((time.monotonic() - started, name))
        try:
            cluster.kill_and_restart(name)
        except Exception as exc:  # noqa: BLE001  # a restart that failed is reported, and the loop goes on
            faults.problems.append(f"{name} did not come back: {exc!r}")


def store_faults(pair: FailoverPair, redis: RedisCluster, seconds: float, stop: threading.Event, faults: Faults,
                 started: float) -> None:  # fmt: skip
    """The PostgreSQL failover at seconds/3 (then the repair), the Redis Cluster master at 2·seconds/3."""

    def at(offset: float) -> bool:
        return not stop.wait(max(0.0, started + offset - time.monotonic()))

    def note(what: str) -> None:
        faults.events.append((time.monotonic() - started, what))

    if at(seconds / 3):
        dead = pair.fail_over()
        note(f"PostgreSQL failover: {dead.name} killed, {pair.primary.name} promoted")
        if at(seconds / 3 + REPAIR_SECONDS):
            try:
                pair.reattach()
                note(f"{pair.standby.name} rewound and attached as the synchronous standby")
            except Exception as exc:  # noqa: BLE001
                faults.problems.append(f"the old primary could not be re-attached: {exc!r}")
    if at(2 * seconds / 3):
        master = random.choice([node for node in redis.nodes if node.running and node.info("replication")
                                .get("role") == "master"])  # fmt: skip
        replica = redis.replica_of(master)
        redis.kill(master)
        note(f"Redis Cluster master {master.address} killed")
        try:
            redis.wait_promoted(replica, seconds=60)
            note(f"Redis replica {replica.address} promoted")
        except AssertionError as exc:
            faults.problems.append(str(exc))
