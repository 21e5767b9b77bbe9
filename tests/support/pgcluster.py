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
