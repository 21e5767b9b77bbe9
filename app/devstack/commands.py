"""The run, test, bench and env commands, and main()."""

import os
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from app.devstack import catalogs
from app.devstack.demo_host import DEMO_PORT
from app.devstack.processes import (
    Child,
    ChildDied,
    Interrupted,
    Signals,
    check_children,
    dev_secret_key,
    flask_argv,
    port_in_use,
    run_foreground,
    stop_children,
    wait_for_standin,
    wait_for_web,
)
from app.devstack.services import (
    Embedded,
    ensure_database,
    machine_postgres_answers,
    machine_redis_answers,
    resolve_shared_services,
    start_machine_postgres,
    start_machine_redis,
)
from app.devstack.settings import (
    APNS_STANDIN_DIR,
    APNS_STANDIN_PORT,
    BASE_URL,
    BENCH_DB,
    BENCH_REDIS_DB,
    CHROMIUM,
    DEFAULT_SMTP_URL,
    DEMO_APNS_TOPIC,
    DEMO_FCM_PROJECT,
    FCM_STANDIN_DIR,
    FCM_STANDIN_PORT,
    GUNICORN_ARGS,
    HOST,
    MACHINE_PG,
    MACHINE_REDIS_PORT,
    MAIL_DIR,
    ROOT,
    RUN_DB,
    RUN_REDIS_DB,
    SLACK_STANDIN_DIR,
    SLACK_STANDIN_PORT,
    SMTP_PORT,
    STANDIN_SETTINGS,
    TEST_DB,
    TEST_REDIS_DB,
    TEST_SECRET_KEY,
    TEST_WORKERS,
    TWILIO_STANDIN_DIR,
    TWILIO_STANDIN_PORT,
    VAR,
    WEB_PORT,
    _out_lock,
    cli_has_command,
    pg_url_with_database,
    redact,
    redis_url_with_db,
    say,
    say_to_stderr,
    split_args,
)

# --- commands -------------------------------------------------------------------------------------

# The phones' push services `make run` stands in for: (child name, label, the setting that means "use the real
# one", port, directory, the stand-in's module and its own arguments).
PHONE_SERVICES = [
    ("apns", "APNs", "APNS_KEY_FILE", APNS_STANDIN_PORT, APNS_STANDIN_DIR,
     ["tests.support.apns_server", "--topic", DEMO_APNS_TOPIC]),
    ("fcm", "FCM", "FCM_CREDENTIALS_FILE", FCM_STANDIN_PORT, FCM_STANDIN_DIR,
     ["tests.support.fcm_server", "--project", DEMO_FCM_PROJECT]),
    ("twilio", "Twilio", "TWILIO_ACCOUNT_SID", TWILIO_STANDIN_PORT, TWILIO_STANDIN_DIR,
     ["tests.support.twilio_server"]),
    ("slack", "Slack", "SLACK_BOT_TOKEN", SLACK_STANDIN_PORT, SLACK_STANDIN_DIR, ["tests.support.slack_server"]),
]  # fmt: skip


def start_phone_services(env: dict[str, str], signals: Signals, children: list[Child]) -> list[str]:
    """Start the APNs/FCM stand-ins not replaced by real credentials, their settings into env; the summary's lines."""
    started, lines = [], []
    for name, label, setting, port, directory, (module, *args) in PHONE_SERVICES:
        if os.environ.get(setting):
            say(f"{label}: {setting} is set, so phone pushes go to your {label} (the demo phones' tokens are made up)")
            lines.append(f"  {label}: your credentials ({setting}); the demo phones' made-up tokens will be refused")
            continue
        directory.mkdir(parents=True, exist_ok=True)
        settings_file = directory / STANDIN_SETTINGS
        settings_file.unlink(missing_ok=True)  # the stand-in writes it anew once it listens
        argv = [sys.executable, "-m", module, "--host", HOST, "--port", str(port), "--dir", str(directory), *args]
        say(f"starting the local {label} stand-in (python -m {module}) on port {port} …")
        with signals.deferred():
            children.append(Child(name, argv, env))
        started.append((children[-1], label, port, directory, settings_file))
    for child, label, port, directory, settings_file in started:
        settings = wait_for_standin(child, settings_file, port)
        env.update(settings)
        origin = next(settings[k] for k in ("APNS_ENDPOINT", "FCM_API_BASE", "TWILIO_API_BASE", "SLACK_API_BASE")
                      if k in settings)  # fmt: skip
        where = directory.relative_to(ROOT)
        say(f"{label}: the local stand-in answers on {origin} (what it keeps and {STANDIN_SETTINGS} in {where}/)")
        lines.append(f"  {label}: the local stand-in on {origin} (a line per message it takes, under `{child.name}`)")
    return lines


def cmd_run() -> int:
    catalogs.compile_all()
    if port_in_use(WEB_PORT):
        say(f"port {WEB_PORT} is already in use (is another `make run` running?)")
        return 1
    own_smtp = not os.environ.get("SMTP_URL")
    if own_smtp and port_in_use(SMTP_PORT):
        say(f"port {SMTP_PORT} (the local mail sink) is already in use; stop that or set SMTP_URL")
        return 1
    for _, label, setting, port, _, _ in PHONE_SERVICES:
        if not os.environ.get(setting) and port_in_use(port):
            say(f"port {port} (the local {label} stand-in) is already in use; stop that or set {setting}")
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
        env["HATO_DEV"] = "1"  # dev mode: the demo seed is allowed, the start-up check accepts dev secrets
        env.setdefault("BASE_URL", BASE_URL)
        env.setdefault("SMTP_URL", DEFAULT_SMTP_URL)
        # The demo host page (a second origin embedding the bell) may call the feed.
        env.setdefault("FEED_ALLOWED_ORIGINS", f"http://{HOST}:{DEMO_PORT}")
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("SMS_PROVIDER", "twilio")  # alice's number gets the demo's texts (the stand-in, or yours)
        env.setdefault("CHAT_PROVIDER", "slack")  # and alice's Slack DM its chat messages
        # Before the seed: alice's iPhone registers with the APNs topic in force.
        phone_lines = start_phone_services(env, signals, children)

        say("applying migrations (flask --app wsgi db upgrade)")
        subprocess.run(flask_argv("db", "upgrade"), cwd=ROOT, env=env, check=True)
        say("loading demo data (flask --app wsgi demo seed)")
        seeded = subprocess.run(
            flask_argv("demo", "seed"), cwd=ROOT, env=env, check=True, capture_output=True, text=True
        )
        sys.stderr.write(seeded.stderr)
        print(seeded.stdout, end="", flush=True)
        help_text = subprocess.run(flask_argv("--help"), cwd=ROOT, env=env, capture_output=True, text=True).stdout
        has_sweep = cli_has_command(help_text, "sweep")

        plan = []
        if own_smtp:
            for sub in ("tmp", "new", "cur"):  # Maildir creates these only when var/mail is missing
                (MAIL_DIR / sub).mkdir(parents=True, exist_ok=True)
            plan.append(
                (
                    "mail",
                    [
                        sys.executable,
                        "-m",
                        "aiosmtpd",
                        "-n",
                        "-l",
                        f"{HOST}:{SMTP_PORT}",
                        "-c",
                        "aiosmtpd.handlers.Mailbox",
                        str(MAIL_DIR),
                    ],
                )
            )
        plan.append(("web", [sys.executable, "-m", "gunicorn", *GUNICORN_ARGS]))
        plan.append(("worker", flask_argv("worker")))
        if not port_in_use(DEMO_PORT):
            demo_argv = ["-m", "app.devstack.demo_host", "--port", str(DEMO_PORT), "--hato", env["BASE_URL"]]
            plan.append(("demo", [sys.executable, *demo_argv]))
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
            f"  Demo host page embedding the bell (another origin): http://{HOST}:{DEMO_PORT}/ (as demo-alice)",
            "",
            *["  " + line for line in seeded.stdout.rstrip().splitlines()],
            "",
            (
                f"  Mail: the local SMTP sink on {HOST}:{SMTP_PORT} writes each message as a file in "
                f"{MAIL_DIR.relative_to(ROOT)}/new/"
            )
            if own_smtp
            else f"  Mail: sent to SMTP_URL={redact(env['SMTP_URL'])}",
            f"  Phones: the pushes to alice's are in the delivery log (as olivia or adam), "
            f"{BASE_URL}/console/deliveries?user=demo-alice&channel=push",
            *phone_lines,
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


CJK_FONT_DIR = Path("/usr/share/fonts/opentype/noto")  # Debian's fonts-noto-cjk: Japanese in screenshots
NGINX = "/usr/sbin/nginx"  # Debian's nginx, in front of two web processes in tests/e2e/test_behind_nginx.py
# Debian's redis-server (it pulls in redis-tools, which has redis-cli): the chaos tests' private servers and the
# six-node Redis Cluster of tests/test_realtime_store_cluster.py (tests/support/redis_cluster.py).
REDIS_PROGRAMS = ("redis-server", "redis-cli")


def ensure_test_packages() -> str:
    """Return the Chromium path for the browser tests, installing missing Debian packages if we can.

    Besides Chromium: Debian's Noto CJK fonts (without them Japanese pages render as empty boxes in the
    browser tests' screenshots; the checks pass either way, people reading the screenshots need them),
    and nginx, which tests/e2e/test_behind_nginx.py runs in front of two web processes with deploy/'s site,
    and redis-server with redis-cli, which the chaos tests and the Redis Cluster tests start on their own ports.
    """
    path = os.environ.get("CHROMIUM_PATH") or CHROMIUM
    missing = [] if Path(path).exists() else ["chromium"]
    if not list(CJK_FONT_DIR.glob("NotoSansCJK*")):
        missing.append("fonts-noto-cjk")
    if not Path(NGINX).exists():
        missing.append("nginx")
    if not all(shutil.which(program) for program in REDIS_PROGRAMS):
        missing.append("redis-server")
    if missing and (path == CHROMIUM or missing != ["chromium"]) and os.geteuid() == 0 and shutil.which("apt-get"):
        say(f"installing Debian's {' '.join(missing)} (apt-get) …")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        if subprocess.run(["apt-get", "update", "-q"], env=env).returncode == 0:
            subprocess.run(["apt-get", "install", "-y", "-q", *missing], env=env)
    if not Path(path).exists():
        say(
            f"WARNING: no Chromium at {path}; the browser tests (tests/e2e) will fail. "
            "Install Debian's package (`sudo apt-get install -y chromium`) or set CHROMIUM_PATH."
        )
    if not all(shutil.which(program) for program in REDIS_PROGRAMS):
        say(
            "WARNING: no redis-server / redis-cli; the Redis Cluster tests are skipped and the chaos tests fail. "
            "Install Debian's package (`sudo apt-get install -y redis-server`)."
        )
    return path


# The real OpenID Connect provider the OIDC sign-in tests start (tests/support/oidc: node-oidc-provider, pinned).
NODE_PACKAGE_DIRS = ("tests/support/oidc",)


def ensure_node_packages() -> None:
    """Install the tests' Node packages (npm ci, from the pinned lock) where node_modules is missing or older."""
    for folder in NODE_PACKAGE_DIRS:
        where = ROOT / folder
        lock, installed = where / "package-lock.json", where / "node_modules" / ".package-lock.json"
        if installed.exists() and installed.stat().st_mtime >= lock.stat().st_mtime:
            continue
        if not shutil.which("npm"):
            say(f"WARNING: no npm; the tests that need {folder}'s packages will fail (install Debian's nodejs and npm)")
            continue
        say(f"installing {folder}'s Node packages (npm ci) …")
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=where, check=False)


def parallel_args(pytest_args: list[str]) -> list[str]:
    """pytest-xdist's arguments for the whole suite: HATO_TEST_WORKERS processes (2: this machine's CPUs), each
    test file on one of them (module fixtures such as a Redis Cluster are started once). A run of chosen paths,
    or one that says -n itself, stays as asked."""
    workers = TEST_WORKERS
    chosen = any(not arg.startswith("-") for arg in pytest_args)
    if workers < 2 or chosen or any(arg.startswith(("-n", "--numprocesses", "-p")) for arg in pytest_args):
        return []
    return ["-n", str(workers), "--dist", "loadfile"]


def cmd_test(pytest_args: list[str]) -> int:
    catalogs.compile_all()
    chromium = ensure_test_packages()
    ensure_node_packages()
    signals = Signals()
    signals.install()
    embedded = Embedded(signals)
    try:
        db_url, redis_url = resolve_shared_services(embedded, TEST_DB, TEST_REDIS_DB)
        env = dict(
            os.environ,
            DATABASE_URL=db_url,
            REDIS_URL=redis_url,
            HATO_TEST="1",
            HATO_DEV="1",
            SECRET_KEY=TEST_SECRET_KEY,
            CHROMIUM_PATH=chromium,
        )
        pytest_args = [*parallel_args(pytest_args), *pytest_args]
        say("running: python -m pytest " + " ".join(shlex.quote(a) for a in pytest_args))
        return run_foreground([sys.executable, "-m", "pytest", *pytest_args], env)
    except Interrupted:
        say("interrupted")
        return 130
    finally:
        signals.stopping = True
        embedded.stop()


def cmd_soak(pytest_args: list[str]) -> int:
    """The multi-node soak (tests/soak), which the default `-m 'not soak'` leaves out of `test`; -s shows its table."""
    paths = [] if any(not arg.startswith("-") for arg in pytest_args) else ["tests/soak"]
    return cmd_test(["-m", "soak", "-s", "-p", "no:randomly", *pytest_args, *paths])


def cmd_bench() -> int:
    catalogs.compile_all()
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
        # Not dev mode, and a random secret of this run's own: each benchmark then starts its processes just
        # as it does from a plain shell (tests/support/databases.py bench_environment).
        env = dict(os.environ, DATABASE_URL=db_url, REDIS_URL=redis_url, PYTHONUNBUFFERED="1")
        env["SECRET_KEY"] = secrets.token_urlsafe(48)
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
    say_to_stderr()
    exports: dict[str, str] = {}
    if os.environ.get("DATABASE_URL"):
        exports["DATABASE_URL"] = pg_url_with_database(os.environ["DATABASE_URL"], TEST_DB)
    elif machine_postgres_answers() or start_machine_postgres():
        exports["DATABASE_URL"] = f"{MACHINE_PG}/{TEST_DB}"
    else:
        print(
            "# no PostgreSQL answers on 127.0.0.1:5432; `make test` uses an embedded one "
            "(var/pg-test) only while it runs"
        )
    if os.environ.get("REDIS_URL"):
        exports["REDIS_URL"] = redis_url_with_db(os.environ["REDIS_URL"], TEST_REDIS_DB)
    elif machine_redis_answers() or start_machine_redis():
        exports["REDIS_URL"] = f"redis://{HOST}:{MACHINE_REDIS_PORT}/{TEST_REDIS_DB}"
    else:
        print(
            "# no Redis answers on 127.0.0.1:6379; `make test` uses an embedded one "
            "(var/redis-test.db) only while it runs"
        )
    exports.update(
        HATO_TEST="1",
        HATO_DEV="1",
        SECRET_KEY=TEST_SECRET_KEY,
        CHROMIUM_PATH=os.environ.get("CHROMIUM_PATH") or CHROMIUM,
    )
    for key, value in exports.items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


def _usage() -> str:
    from app import devstack

    return devstack.__doc__ or ""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0 if argv else 2
    command, rest = split_args(argv)
    if command == "run" and not rest:
        return cmd_run()
    if command == "test":
        return cmd_test(rest)
    if command == "soak":
        return cmd_soak(rest)
    if command == "bench" and not rest:
        return cmd_bench()
    if command == "env" and not rest:
        return cmd_env()
    if command == "i18n" and not rest:
        return catalogs.main()
    if command == "catalogs" and not rest:
        catalogs.compile_all()
        return 0
    print(_usage(), file=sys.stderr)
    return 2
