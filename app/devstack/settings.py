"""Constants, the console logger and pure helpers (unit-tested in tests/test_devstack.py)."""

import os
import re
import sys
import threading
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
VAR = ROOT / "var"
MAIL_DIR = VAR / "mail"

HOST = "127.0.0.1"
WEB_PORT = 5000
SMTP_PORT = 8025
BASE_URL = f"http://{HOST}:{WEB_PORT}"
DEFAULT_SMTP_URL = f"smtp://{HOST}:{SMTP_PORT}"

# The phones' push services of `make run` (tests/support/apns_server.py, fcm_server.py run on their own):
# 2197 is the port Apple offers besides 443. Each keeps its key, CA and settings.json in its directory.
APNS_STANDIN_PORT = 2197
FCM_STANDIN_PORT = 2198
APNS_STANDIN_DIR = VAR / "apns"
FCM_STANDIN_DIR = VAR / "fcm"
TWILIO_STANDIN_PORT = 2199  # SMS: alice's number gets the demo's texts here (tests/support/twilio_server.py)
TWILIO_STANDIN_DIR = VAR / "twilio"
SLACK_STANDIN_PORT = 2200  # chat: alice's Slack DM gets the demo's messages here (tests/support/slack_server.py)
SLACK_STANDIN_DIR = VAR / "slack"
STANDIN_SETTINGS = "settings.json"
DEMO_APNS_TOPIC = "org.hato.demo"  # the demo app's bundle id: alice's iPhone registers with it
DEMO_FCM_PROJECT = "hato-demo"

# The web server of `make run`; docs/getting-started.md documents these exact arguments.
# app/realtime/gunicorn_conf.py sizes the gthread pool for websockets (WEB_MAX_SOCKETS, default 1000
# per worker) and closes sockets with 1001 on SIGTERM so pages reconnect.
GUNICORN_ARGS = [
    "-c",
    "python:app.realtime.gunicorn_conf",
    "wsgi:app",
    "--bind",
    f"{HOST}:{WEB_PORT}",
    "--graceful-timeout",
    "5",
]

MACHINE_PG = "postgresql://postgres@127.0.0.1:5432"
MACHINE_REDIS_PORT = 6379
CHROMIUM = "/usr/bin/chromium"
STOP_GRACE_SECONDS = 8.0

RUN_DB, RUN_REDIS_DB = "hato", 0
# make test's own signing key: the suite's sessions only, never a deployment's.
TEST_SECRET_KEY = "test-secret"  # noqa: S105
# HATO_TEST_DB / HATO_TEST_REDIS_DB let two checkouts on one machine run their suites side by side.
TEST_DB = os.environ.get("HATO_TEST_DB", "hato_test")
TEST_REDIS_DB = int(os.environ.get("HATO_TEST_REDIS_DB", "15"))
# pytest-xdist workers for the whole suite (each with its own database and Redis number: tests/conftest.py).
TEST_WORKERS = int(os.environ.get("HATO_TEST_WORKERS", "2"))
BENCH_DB, BENCH_REDIS_DB = "hato_bench", 14

_out_lock = threading.Lock()
_say_stream = sys.stdout


def say_to_stderr() -> None:
    """Send say() lines to stderr (for `env`, whose stdout is meant for eval)."""
    global _say_stream
    _say_stream = sys.stderr


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
