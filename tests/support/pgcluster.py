"""A private, throw-away PostgreSQL cluster for tests that stop and start the server.

The machine's shared PostgreSQL on 5432 must never be stopped, so chaos tests that take the database
away run their own: initdb into a temporary directory, pg_ctl start on a free port (fsync off: the
data is scratch), stop -m fast, start again, and remove it all afterwards. initdb refuses to run as
root, so as root every server command runs as the `postgres` system user, which owns the data dir.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tests.support.waiting import free_port

BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
SERVER_USER = "postgres"  # the account initdb and postgres run as when this process is root
START_SECONDS = 30


def available() -> bool:
    """True if the server binaries are installed (and, as root, their system user exists)."""
    if not (BIN / "initdb").exists():
        return False
    if os.geteuid() != 0:
        return True
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        return False
    return True


class Cluster:
    """One PostgreSQL server in its own data directory on a free 127.0.0.1 port."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.sockets = root / "sockets"
        self.log = root / "server.log"
        self.port = free_port()

    def url(self, dbname: str = "postgres") -> str:
        """A DATABASE_URL for dbname on this server (trust auth, user postgres)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def _run(self, *args: str, timeout: float = 60) -> None:
        command = [str(BIN / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=timeout)

    def init(self) -> None:
        """initdb with trust authentication and the superuser `postgres`."""
        self.sockets.mkdir()
        if os.geteuid() == 0:
            account = pwd.getpwnam(SERVER_USER)
            for path in (self.root, self.sockets):
                os.chown(path, account.pw_uid, account.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = (
            f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", str(START_SECONDS), "start"
        )
        self.wait_ready()

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (fast: roll back open transactions and close every connection)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def running(self) -> bool:
        """True if pg_ctl sees a server on this data directory."""
        command = [str(BIN / "pg_ctl"), "-D", str(self.data), "status"]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        return subprocess.run(command, capture_output=True).returncode == 0

    def wait_ready(self, seconds: float = START_SECONDS) -> None:
        """Wait until a connection succeeds."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def create_database(self, name: str) -> str:
        """CREATE DATABASE name; return its URL."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@contextmanager
def cluster():
    """Yield a started Cluster; stop it and delete its files whatever happens."""
    # Under /tmp, not a test's tmp_path (inside root's private directories): as root, init() hands this
    # directory to the server user, who must be able to reach it.
    root = Path(tempfile.mkdtemp(prefix="hato-pgcluster-"))
    server = Cluster(root)
    try:
        server.init()
        server.start()
        yield server
    finally:
        try:
            if server.data.exists() and server.running():
                server.stop("immediate")
        finally:
            shutil.rmtree(root, ignore_errors=True)


# --- read replicas (issue 34): a streaming standby of a private primary --------------------------


class CommittingPrimary(Cluster):
    """A private primary whose commits wait for their WAL flush, as production's do (fsync stays off: scratch)."""

    def start(self) -> None:
        """Start the server as Cluster does, but with synchronous_commit on (read-your-writes waits on flushes)."""
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", str(START_SECONDS), "start"
        )  # fmt: skip
        self.wait_ready()


class Replica(Cluster):
    """A hot standby streaming from a private primary: pg_basebackup -R, then its own server on a free port."""

    def __init__(self, root: Path, primary: Cluster) -> None:
        super().__init__(root)
        self.primary = primary

    def init(self) -> None:
        """Copy the primary (with its WAL streamed) and write the standby settings (-R: primary_conninfo)."""
        self.sockets.mkdir()
        if os.geteuid() == 0:
            account = pwd.getpwnam(SERVER_USER)
            for path in (self.root, self.sockets):
                os.chown(path, account.pw_uid, account.pw_gid)
        self._run(
            "pg_basebackup", "-D", str(self.data), "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", "postgres",
            "-R", "-X", "stream", "--no-sync", "-c", "fast",
        )  # fmt: skip

    def set_apply_delay(self, seconds: float) -> None:
        """Replay each commit no sooner than seconds after it happened on the primary (recovery_min_apply_delay)."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            # ALTER SYSTEM writes postgresql.auto.conf, which a standby may do; the setting reloads without a restart.
            conn.execute(f"ALTER SYSTEM SET recovery_min_apply_delay = '{int(seconds * 1000)}ms'")
            conn.execute("SELECT pg_reload_conf()")

    def replayed(self) -> int:
        """How far this standby has replayed the primary's WAL (a byte position)."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            return conn.execute("SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint").fetchone()[0]

    def wait_caught_up(self, seconds: float = 30) -> None:
        """Wait until this standby has replayed everything the primary has written so far."""
        with psycopg.connect(self.primary.url()) as conn:
            # A synchronous commit flushes all WAL before it (these servers commit asynchronously): a standby only
            # receives flushed WAL, and what sits in the buffers may wait there for seconds.
            conn.execute("SET LOCAL synchronous_commit = on")
            conn.execute("SELECT pg_logical_emit_message(true, 'hato-tests', 'flush')")  # WAL of its own: flushed
            conn.commit()
            target = conn.execute("SELECT (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint").fetchone()[0]
        deadline = time.monotonic() + seconds
        while self.replayed() < target:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standby replayed {self.replayed()} of {target} in {seconds} s")
            time.sleep(0.05)


@contextmanager
def primary_with_replica():
    """Yield (primary, replica): a started private primary and a hot standby streaming from it; both removed after."""
    roots = [Path(tempfile.mkdtemp(prefix=f"hato-pg{role}-")) for role in ("primary", "replica")]
    primary = CommittingPrimary(roots[0])
    replica = Replica(roots[1], primary)
    try:
        primary.init()
        primary.start()
        replica.init()
        replica.start()
        yield primary, replica
    finally:
        try:
            for server in (replica, primary):
                if server.data.exists() and server.running():
                    server.stop("immediate")
        finally:
            for root in roots:
                shutil.rmtree(root, ignore_errors=True)


# --- a primary and its synchronous standby, for failover tests (issue 34) ------------------------------------

REPLICATION_USER = "replicator"
# What pg_rewind needs (full-page writes, hint bits in WAL) and what a synchronous pair needs (commits wait for
# the standby). fsync stays off: the tests kill processes, not machines, so the page cache keeps every write.
# In postgresql.conf, not on the command line: pg_rewind's crash recovery runs the server without our options,
# and its checkpoint must still record wal_log_hints. pg_basebackup copies the file to the standby.
HA_SETTINGS = """
listen_addresses = '127.0.0.1'
fsync = off
full_page_writes = on
wal_log_hints = on
synchronous_commit = on
wal_keep_size = '256MB'
hot_standby = on
wal_receiver_status_interval = 1
wal_retrieve_retry_interval = '200ms'
"""


class Node(Cluster):
    """One member of a failover pair: a primary or a streaming standby, each on its own port."""

    def __init__(self, root: Path, name: str) -> None:
        super().__init__(root)
        self.name = name
        self.data = root / "data"

    def start(self) -> None:
        """Start with the replication settings; cluster_name is the application name the primary sees."""
        options = f"-p {self.port} -k {self.sockets} -c cluster_name={self.name}"
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", str(START_SECONDS), "start"
        )
        self.wait_ready()

    def _run(self, *args: str, timeout: float = 60) -> None:
        """Cluster._run, with the tool's own complaint in the error."""
        try:
            super()._run(*args, timeout=timeout)
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"{args[0]} failed on {self.name}: {exc.stderr.decode(errors='replace')}") from exc

    def init(self) -> None:
        """initdb, then the replication settings every node of the pair shares."""
        super().init()
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(HA_SETTINGS)

    def conninfo(self, user: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={user} dbname=postgres"

    def sql(self, statement: str) -> list[tuple]:
        """Run one statement in autocommit as the superuser; return its rows (none for a command)."""
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(statement)
            return cursor.fetchall() if cursor.description else []

    def in_recovery(self) -> bool:
        return bool(self.sql("SELECT pg_is_in_recovery()")[0][0])

    def make_primary(self) -> None:
        """A replication role; commits wait for a standby (synchronous_standby_names, as an HA manager sets it)."""
        self.sql(f"CREATE ROLE {REPLICATION_USER} WITH REPLICATION LOGIN")
        self.require_sync_standby()

    def require_sync_standby(self) -> None:
        self.sql("ALTER SYSTEM SET synchronous_standby_names = '*'")
        self.sql("SELECT pg_reload_conf()")

    def clone_from(self, primary: Node) -> None:
        """pg_basebackup -R: a copy of primary that starts as its streaming standby."""
        self.sockets.mkdir()
        if os.geteuid() == 0:
            account = pwd.getpwnam(SERVER_USER)
            for path in (self.root, self.sockets):
                os.chown(path, account.pw_uid, account.pw_gid)
        self._run("pg_basebackup", "-d", primary.conninfo(REPLICATION_USER), "-D", str(self.data), "-R",
                  "-X", "stream", "--no-sync", "-c", "fast")  # fmt: skip

    def kill9(self) -> None:
        """kill -9 the postmaster and every backend at once: the machine is gone, nothing is flushed or said."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        pids = [postmaster, *_children(postmaster)]
        for pid in pids:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        # Gone, not merely a zombie: a postmaster.pid naming a live pid (a zombie is one) stops the restart.
        deadline = time.monotonic() + 10
        while Path(f"/proc/{postmaster}").exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}'s postmaster {postmaster} was not reaped")
            time.sleep(0.02)

    def promote(self) -> None:
        """What an HA manager does to the standby it elects: no sync standby to wait for yet, then promote."""
        self.sql("ALTER SYSTEM SET synchronous_standby_names = ''")  # a promoted node alone must not block commits
        self.sql("SELECT pg_reload_conf()")
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", str(START_SECONDS), "promote")

    def rewind_onto(self, primary: Node) -> None:
        """pg_rewind this crashed old primary to primary's timeline and start it as primary's standby."""
        # pg_rewind runs crash recovery on the target first (it was killed, not shut down), then copies what
        # diverged; -R writes standby.signal and primary_conninfo. The CHECKPOINT first (as Patroni issues one): a
        # promoted server's control file names its new timeline only after one, and pg_rewind reads it there.
        primary.sql("CHECKPOINT")
        self._run("pg_rewind", "-D", str(self.data), "--source-server", primary.conninfo(), "-R", "--no-sync",
                  timeout=120)  # fmt: skip
        self.start()

    def streaming_to(self, primary: Node) -> bool:
        """True once primary sees this node as its synchronous standby."""
        rows = primary.sql(f"SELECT sync_state FROM pg_stat_replication WHERE application_name = '{self.name}'")
        return bool(rows) and rows[0][0] == "sync"


def _children(pid: int) -> list[int]:
    """Direct children of pid (the server's backends and helpers), from /proc."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        found += [int(child) for child in task.read_text().split()]
    return found


class FailoverPair:
    """A primary and its synchronous standby; a failover kills the primary and promotes the standby."""

    def __init__(self, first: Node, second: Node) -> None:
        self.primary, self.standby = first, second
        self.nodes = (first, second)

    def url(self, dbname: str) -> str:
        """The multi-host DATABASE_URL an application gets: libpq finds whichever node takes writes."""
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)
        return f"postgresql://postgres@{hosts}/{dbname}?target_session_attrs=read-write&connect_timeout=2"

    def wait_synchronous(self, seconds: float = 30) -> None:
        deadline = time.monotonic() + seconds
        while not self.standby.streaming_to(self.primary):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.standby.name} is not a synchronous standby of {self.primary.name}")
            time.sleep(0.1)

    def fail_over(self, detection_seconds: float = 1.0) -> Node:
        """kill -9 the primary; after the HA manager's detection delay, promote the standby. Return the dead node."""
        dead, elected = self.primary, self.standby
        dead.kill9()
        time.sleep(detection_seconds)
        elected.promote()
        self.primary, self.standby = elected, dead
        return dead

    def reattach(self) -> None:
        """The old primary comes back as the new primary's synchronous standby (pg_rewind), as after a repair."""
        self.standby.rewind_onto(self.primary)
        self.primary.require_sync_standby()
        self.wait_synchronous()


@contextmanager
def failover_pair():
    """Yield a started FailoverPair (node_a primary, node_b its synchronous standby); remove both afterwards."""
    roots = [Path(tempfile.mkdtemp(prefix="hato-pgpair-")) for _ in range(2)]
    first, second = Node(roots[0], "node_a"), Node(roots[1], "node_b")
    try:
        first.init()
        first.start()
        first.make_primary()
        second.clone_from(first)
        second.start()
        pair = FailoverPair(first, second)
        pair.wait_synchronous()
        yield pair
    finally:
        for node in (first, second):
            try:
                if node.data.exists() and node.running():
                    node.stop("immediate")
            except (RuntimeError, subprocess.SubprocessError):
                pass  # the other node and both directories are still cleaned up
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)
