"""A real Redis Cluster for tests: six Debian `redis-server` processes (3 masters, 3 replicas) on loopback.

`with RedisCluster(tmp_path) as cluster:` starts them (`--cluster-enabled yes`, no persistence, a node timeout
of 1 s so a killed master's replica takes over within a few seconds), joins them with
`redis-cli --cluster create … --cluster-replicas 1 --cluster-yes`, waits until every node says
`cluster_state:ok` and every replica's link to its master is up, and stops every process on the way out.
`cluster.url` is the seed URL (any node: a RedisCluster client finds the rest); `cluster.nodes` are the
processes, so a test can kill -9 a master (`cluster.kill(node)`) and `wait_promoted()` its replica.

Ports: 12 consecutive ones (6 client ports, then 6 `cluster-port` bus ports) picked at random in
20000–29999, below the kernel's ephemeral range, so no outgoing connection holds one; a range another
process took is given up for another one. `missing_binaries()` names what is not installed (tests skip).
"""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import redis as redis_lib
from redis.cluster import RedisCluster as RedisClusterClient

from tests.support.waiting import wait_for

NODES = 6
PORT_RANGE = (20000, 30000 - 2 * NODES)
START_SECONDS = 10.0
FORM_SECONDS = 30.0
NODE_TIMEOUT_MS = 1000
BINARIES = ("redis-server", "redis-cli")


def missing_binaries() -> list[str]:
    """The programs this needs that are not on PATH (Debian: `apt-get install redis-server`, with redis-tools)."""
    return [name for name in BINARIES if shutil.which(name) is None]


@dataclass
class Node:
    """One redis-server of the cluster."""

    port: int
    bus_port: int
    workdir: Path
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self) -> redis_lib.Redis:
        """A plain client of this one node (CLUSTER INFO, ROLE, WAIT…)."""
        return redis_lib.Redis(host="127.0.0.1", port=self.port, socket_timeout=2, socket_connect_timeout=1)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def info(self, section: str) -> dict:
        return self.client().info(section)

    def cluster_ok(self) -> bool:
        try:
            return self.client().cluster("INFO").get("cluster_state") == "ok"  # redis-py parses it into a dict
        except redis_lib.RedisError:
            return False


class RedisCluster:
    """Six redis-server processes joined into one cluster; see the module docstring."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.nodes: list[Node] = []

    @property
    def url(self) -> str:
        """The seed URL (the first node's); REALTIME_REDIS_URL with REALTIME_REDIS_CLUSTER on."""
        return f"redis://{self.nodes[0].address}/0"

    @property
    def seeds_url(self) -> str:
        """Every node as a seed, as production should name them: a process starting while one is down asks the next."""
        return f"redis://{','.join(node.address for node in self.nodes)}/0"

    def client(self, **options) -> RedisClusterClient:
        """A fresh RedisCluster client (the app's own is app/extensions.py's redis.realtime())."""
        return RedisClusterClient.from_url(self.url, socket_timeout=2, socket_connect_timeout=1, **options)

    # --- start and stop ---------------------------------------------------------------------------

    def start(self) -> RedisCluster:
        missing = missing_binaries()
        if missing:
            raise RuntimeError(f"{', '.join(missing)} not installed (Debian: apt-get install redis-server)")
        for attempt in range(5):
            base = self._free_range()
            self.nodes = [
                Node(base + i, base + NODES + i, self.workdir / f"attempt{attempt}-node{i}") for i in range(NODES)
            ]
            try:
                for node in self.nodes:
                    self._start_node(node)
                break
            except _PortTaken:
                self.stop()
        else:
            raise RuntimeError("no free port range for the Redis Cluster after 5 tries")
        self._create()
        return self

    def _free_range(self) -> int:
        for _ in range(50):
            base = random.randrange(*PORT_RANGE)
            if all(_port_free(port) for port in range(base, base + 2 * NODES)):
                return base
        raise RuntimeError("no 12 free consecutive ports in 20000-29999")

    def _start_node(self, node: Node) -> None:
        node.workdir.mkdir(parents=True, exist_ok=True)
        args = [shutil.which("redis-server"), "--port", str(node.port), "--bind", "127.0.0.1"]
        args += ["--cluster-enabled", "yes", "--cluster-port", str(node.bus_port)]
        args += ["--cluster-config-file", str(node.workdir / "nodes.conf")]
        args += ["--cluster-node-timeout", str(NODE_TIMEOUT_MS)]
        # A replica may always take over (no data-age check: the tests kill masters on purpose).
        args += ["--cluster-replica-validity-factor", "0"]
        # No persistence; replicas sync at once over the socket (the default waits 5 s for more replicas).
        args += ["--save", "", "--appendonly", "no", "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"]
        args += ["--repl-ping-replica-period", "1", "--dir", str(node.workdir), "--daemonize", "no"]
        log = open(node.workdir / "redis.log", "ab")
        node.proc = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        log.close()

        def answers() -> bool:
            if node.proc.poll() is not None:
                text = (node.workdir / "redis.log").read_text(errors="replace")
                if "Address already in use" in text:
                    raise _PortTaken(node.port)
                raise RuntimeError(f"redis-server exited with {node.proc.returncode}; see {node.workdir}/redis.log")
            try:
                return bool(node.client().ping())
            except redis_lib.RedisError:
                return False

        wait_for(answers, START_SECONDS, f"redis-server to answer on port {node.port}", interval=0.05)

    def _create(self) -> None:
        args = [shutil.which("redis-cli"), "--cluster", "create", *(n.address for n in self.nodes)]
        args += ["--cluster-replicas", "1", "--cluster-yes"]
        done = subprocess.run(args, capture_output=True, text=True, timeout=FORM_SECONDS)
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout}\n{done.stderr}")
        wait_for(lambda: all(n.cluster_ok() for n in self.nodes), FORM_SECONDS, "cluster_state:ok on every node")
        wait_for(self._replicas_synced, FORM_SECONDS, "every replica's link to its master")

    def _replicas_synced(self) -> bool:
        roles = [n.info("replication") for n in self.nodes if n.running]
        replicas = [r for r in roles if r.get("role") == "slave"]
        return len(replicas) == NODES // 2 and all(r.get("master_link_status") == "up" for r in replicas)

    def stop(self) -> None:
        """Kill every node (no data to keep) and wait for each to go."""
        for node in self.nodes:
            if node.running:
                _kill(node.proc)
            if node.proc is not None:
                node.proc.wait(10)

    def __enter__(self) -> RedisCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- what failover tests need -----------------------------------------------------------------

    def master_of(self, key: str) -> Node:
        """The node that serves key's slot now (asked of a running node, not a client's cached map)."""
        asker = next(n for n in self.nodes if n.running)
        slot = asker.client().execute_command("CLUSTER KEYSLOT", key)
        for start, end, master, *_ in asker.client().execute_command("CLUSTER SLOTS"):
            if start <= slot <= end:
                port = int(master[1])
                return next(n for n in self.nodes if n.port == port)
        raise AssertionError(f"no node serves slot {slot}")

    def replica_of(self, master: Node) -> Node:
        """master's replica (the node that takes over when it dies)."""
        for node in self.nodes:
            if node.running and node is not master:
                info = node.info("replication")
                if info.get("role") == "slave" and int(info.get("master_port", 0)) == master.port:
                    return node
        raise AssertionError(f"{master.address} has no replica")

    def wait_replicated(self, master: Node, replica: Node, seconds: float = 10.0) -> None:
        """Wait until replica has processed every write master had taken by now (its replication offset).

        WAIT on a connection of one's own proves nothing here: it waits for that connection's writes, and the
        writes under test came through the cluster client's connections.
        """
        target = int(master.info("replication")["master_repl_offset"])
        wait_for(lambda: int(replica.info("replication").get("slave_repl_offset", -1)) >= target, seconds,
                 f"{replica.address} to replicate {master.address} up to offset {target}", interval=0.05)  # fmt: skip

    def kill(self, node: Node) -> None:
        """kill -9 one node (its replica takes over after the node timeout)."""
        _kill(node.proc)
        node.proc.wait(10)

    def wait_promoted(self, replica: Node, seconds: float = 20.0) -> None:
        """Wait until replica is a master and every running node says cluster_state:ok again."""

        def promoted() -> bool:
            try:
                return replica.info("replication").get("role") == "master"
            except redis_lib.RedisError:
                return False

        wait_for(promoted, seconds, f"{replica.address} to be promoted", interval=0.1)
        wait_for(lambda: all(n.cluster_ok() for n in self.nodes if n.running), seconds, "cluster_state:ok again")


class _PortTaken(RuntimeError):
    """Another process took a port of the range between the check and the bind."""


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kill(proc: subprocess.Popen) -> None:
    try:
        proc.send_signal(signal.SIGKILL)
    except ProcessLookupError:
        pass
