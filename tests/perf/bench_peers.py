"""Side by side with django-notifications-hq (issue 34 item 3): the same data, each side's documented way.

    python -m tests.perf.bench_peers [--users 10000] [--per-user 100] [--heavy-rows 100000] [--rounds 5]
                                     [--repeat 20] [--inserts 10000] [--batch 100] [--insert-rounds 3]

The peer, django-notifications-hq (the most used notification inbox for Python web apps), is installed with the
pinned Django and psycopg it needs (PEER_PINS) into a virtualenv of its own, var/bench-peers-venv (`--venv`; made
with `python -m venv` and pip, and reused while its pins match), never into Hato's. The bench writes a tiny Django
project into a temporary directory (settings with INSTALLED_APPS auth, contenttypes and notifications, and the
package's defaults), runs `migrate` there, and drives a script in the peer's python that answers one JSON line per
command with its timings.

Both sides use their own databases on the server of DATABASE_URL (`hato_bench_peers` migrated by Hato's migrations,
`hato_bench_peers_django` by the package's; dropped and created here, dropped at the end) with the same data,
loaded set-based (INSERT … SELECT, not measured): --users users with --per-user notifications each (the seed
article's layout: the newest 5 unread) and one heavy user with --heavy-rows over the same weeks, half of them unread
(every other row).
Each side has exactly the indexes its migrations make; then VACUUM ANALYZE. Redis database --redis-db (flushed)
serves Hato's badge events. Holds an exclusive flock on /tmp/hato-bench.lock while it runs.

Measured in one run, in interleaved rounds (the side that goes first alternates), for the heavy user and a typical
one (user 42); each figure is the median of all timed runs (the first run of each operation in a round warms up):

  unread count   peer: user.notifications.unread().count()   Hato: the badge's statement (queries.unread_counts,
                 which counts at most BADGE_CAP rows: the badge shows "99+" beyond; the peer counts every row)
  first page     peer: list(user.notifications.all()[:20])   Hato: queries.notification_page (the inbox list)
  page 50        peer: all()[980:1000] (its paginator's way)   Hato: the keyset page after 49 pages (heavy user)
  mark all read  peer: user.notifications.mark_all_as_read()   Hato: inbox.service.read_all + commit (heavy user;
                 its half unread is restored and vacuumed between rounds, not measured)
  insert         peer: notify.send(actor, recipient=<batch of --batch users>, verb=…) for --inserts recipients
                 Hato: POST /v1/notifications with --batch recipients per request to gunicorn (the API-only
                 production line, started here on 127.0.0.1), one client connection, one request at a time

Hato's reads and its mark-all run in this process (Flask app context, SQLAlchemy, each call ended by its
rollback/commit as a request ends); the peer's in its script (Django ORM, autocommit). Prints a table, then one JSON
line: badge_ratio, page1_ratio, page50_ratio, mark_all_ratio, insert_ratio (each Hato's speed ÷ the peer's, for the
heavy user; *_typical for user 42) and the milliseconds behind them.
"""

from __future__ import annotations

import argparse
import fcntl
import http.client
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path

from sqlalchemy import text as sa_text

BENCH_DB = "hato_bench_peers"
PEER_DB = "hato_bench_peers_django"
BENCH_REDIS_DB = 11
LOCK_PATH = "/tmp/hato-bench.lock"
ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / "var" / "bench-peers-venv"
# The package's newest release and what it runs on (it supports Django up to 4.2), every transitive pin included.
PEER_PINS = (
    "django-notifications-hq==1.8.3",
    "Django==4.2.30",
    "psycopg[binary]==3.3.9",
    "psycopg-binary==3.3.9",
    "asgiref==3.13.0",
    "django-model-utils==5.0.0",
    "jsonfield==3.2.0",
    "swapper==1.5.0",
    "sqlparse==0.6.1",
    "pytz==2026.6",
    "typing_extensions==4.16.0",
)
TYPICAL_USER = 42
UNREAD_PER_USER = 5  # the seed's: the newest 5 of each user's rows are unread
PAGE = 20
DEEP_PAGE = 50
TIME_LIMIT_SECONDS = 1800

# --- the peer's side: a Django project of the package's defaults, and the script that drives it ------------------

PEER_SETTINGS = """# Written by tests/perf/bench_peers.py: the package's defaults on PostgreSQL.
SECRET_KEY = {secret!r}
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "notifications"]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
DATABASES = {{"default": {{"ENGINE": "django.db.backends.postgresql", "NAME": {name!r}, "USER": {user!r},
                          "PASSWORD": {password!r}, "HOST": {host!r}, "PORT": {port!r}}}}}
"""

PEER_SCRIPT = '''"""Drives django-notifications-hq for tests/perf/bench_peers.py: a JSON command a line in, one out."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ["DJANGO_SETTINGS_MODULE"] = "peer_settings"

import django  # noqa: E402

django.setup()
if sys.argv[1:] == ["migrate"]:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    sys.exit(0)

from django.contrib.auth import get_user_model  # noqa: E402
from notifications.signals import notify  # noqa: E402

User = get_user_model()
users = {}


def samples(fn, repeat):
    """Milliseconds of repeat runs after one warm-up run."""
    fn()
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def answer(command):
    op = command["op"]
    if op == "setup":
        for name, user_id in command["users"].items():
            users[name] = User.objects.get(pk=user_id)
        users["_actor"] = User.objects.get(pk=command["actor"])
        users["_recipients"] = list(User.objects.filter(pk__lte=command["recipients"]).order_by("pk"))
        return {"ok": True, "django": django.get_version()}
    user = users.get(command.get("user"))
    if op == "badge":
        counts = []
        ms = samples(lambda: counts.append(user.notifications.unread().count()), command["repeat"])
        return {"ms": ms, "count": counts[-1]}
    if op == "page1":
        rows = []
        ms = samples(lambda: rows.append(list(user.notifications.all()[:20])), command["repeat"])
        return {"ms": ms, "rows": len(rows[-1])}
    if op == "page50":
        rows = []
        ms = samples(lambda: rows.append(list(user.notifications.all()[980:1000])), command["repeat"])
        return {"ms": ms, "rows": len(rows[-1])}
    if op == "mark_all":
        started = time.perf_counter()
        changed = user.notifications.mark_all_as_read()
        return {"ms": [(time.perf_counter() - started) * 1000], "changed": changed}
    if op == "insert":
        recipients, batch, created = users["_recipients"][: command["count"]], command["batch"], 0
        started = time.perf_counter()
        for first in range(0, len(recipients), batch):
            sent = notify.send(users["_actor"], recipient=recipients[first : first + batch],
                               verb="commented on reservation #%d" % first, description="Body")
            created += sum(len(result) for _, result in sent)
        return {"seconds": time.perf_counter() - started, "created": created}
    if op == "plans":  # what PostgreSQL does for each of the package's statements (EXPLAIN of the captured SQL)
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        calls = {"count": lambda: user.notifications.unread().count(),
                 "page1": lambda: list(user.notifications.all()[:20]),
                 "page50": lambda: list(user.notifications.all()[980:1000])}
        plans = {}
        for name, call in calls.items():
            with CaptureQueriesContext(connection) as captured:
                call()
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN (FORMAT JSON) " + captured.captured_queries[-1]["sql"])
                plan = cursor.fetchone()[0]
            plan = json.loads(plan) if isinstance(plan, str) else plan
            nodes, todo = [], [plan[0]["Plan"]]
            while todo:
                node = todo.pop(0)
                nodes.append(node["Node Type"] + (" on " + node["Index Name"] if "Index Name" in node else ""))
                todo += node.get("Plans", [])
            plans[name] = nodes
        return plans
    raise SystemExit("unknown command %r" % op)


for line in sys.stdin:
    command = json.loads(line)
    if command["op"] == "quit":
        break
    print(json.dumps(answer(command)), flush=True)
'''


def write_peer_project(directory: Path, db_url: str, secret: str) -> Path:
    """Write the peer's settings and driving script into directory; return the script's path."""
    import psycopg

    params = psycopg.conninfo.conninfo_to_dict(db_url.replace("postgresql+psycopg://", "postgresql://"))
    settings = PEER_SETTINGS.format(
        secret=secret,
        name=params.get("dbname", ""),
        user=params.get("user", ""),
        password=params.get("password", ""),
        host=params.get("host", ""),
        port=str(params.get("port", "")),
    )
    (directory / "peer_settings.py").write_text(settings)
    script = directory / "peer_bench.py"
    script.write_text(PEER_SCRIPT)
    return script


def peer_python(venv: Path) -> Path:
    """The peer's own virtualenv (made and filled with PEER_PINS unless it already holds them); its python."""
    python, stamp = venv / "bin" / "python", venv / "bench-peers-pins.txt"
    wanted = "\n".join(PEER_PINS) + "\n"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    print(f"installing {PEER_PINS[0]} into {venv}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_PINS], check=True)
    stamp.write_text(wanted)
    return python


class Peer:
    """The peer's script running in its venv's python; ask() sends one command and returns its JSON answer."""

    def __init__(self, python: Path, script: Path, log) -> None:
        self.proc = subprocess.Popen(
            [str(python), str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True
        )

    def ask(self, **command) -> dict:
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"bench: the peer's script stopped at {command['op']} (see its log)")
        return json.loads(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write('{"op": "quit"}\n')
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --- the data, set-based on both sides ----------------------------------------------------------------------------

HATO_DATA_SQL = [
    """INSERT INTO users (id, external_id, email, display_name) OVERRIDING SYSTEM VALUE
       SELECT u, 'u' || u, 'u' || u || '@example.com', 'User ' || u FROM generate_series(1, %(heavy)s) u""",
    "SELECT setval(pg_get_serial_sequence('users', 'id'), %(heavy)s)",
    """INSERT INTO notification_types (type, label, default_in_app, default_email, default_push)
       VALUES ('comment', 'Comment', true, false, false)""",
    """INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, read_at, created_at)
       SELECT u, 'comment', 'Comment on reservation #' || n, 'Body', '/reservations/' || n, 'seed:' || n,
              CASE WHEN n <= %(per_user)s - %(unread)s
                   THEN timestamptz '2026-10-01 09:00+09' + n * interval '1 hour' END,
              timestamptz '2026-09-01 09:00+09' + n * interval '6 hours'
       FROM generate_series(1, %(users)s) u, generate_series(1, %(per_user)s) n""",
    """INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, read_at, created_at)
       SELECT %(heavy)s, 'comment', 'Comment on reservation #' || n, 'Body', '/reservations/' || n, 'heavy:' || n,
              timestamptz '2026-09-01 09:00+09' + n * %(heavy_step)s + interval '1 hour',
              timestamptz '2026-09-01 09:00+09' + n * %(heavy_step)s
       FROM generate_series(1, %(heavy_rows)s) n""",
]
# Half of the heavy user's rows unread, every other one through the history (also how a round's mark-all is undone).
HATO_UNREAD_SQL = "UPDATE notifications SET read_at = NULL WHERE user_id = %(heavy)s AND id %% 2 = 0"

PEER_DATA_SQL = [
    """INSERT INTO auth_user (id, password, is_superuser, username, first_name, last_name, email, is_staff,
                              is_active, date_joined)
       SELECT u, '!', false, 'u' || u, '', '', 'u' || u || '@example.com', false, true, now()
       FROM generate_series(1, %(actor)s) u""",
    "SELECT setval(pg_get_serial_sequence('auth_user', 'id'), %(actor)s)",
    """INSERT INTO notifications_notification (level, recipient_id, unread, actor_content_type_id, actor_object_id,
                                               verb, description, timestamp, public, deleted, emailed)
       SELECT 'info', u, n > %(per_user)s - %(unread)s, %(user_type)s, %(actor)s::text,
              'commented on reservation #' || n, 'Body',
              timestamptz '2026-09-01 09:00+09' + n * interval '6 hours', true, false, false
       FROM generate_series(1, %(users)s) u, generate_series(1, %(per_user)s) n""",
    """INSERT INTO notifications_notification (level, recipient_id, unread, actor_content_type_id, actor_object_id,
                                               verb, description, timestamp, public, deleted, emailed)
       SELECT 'info', %(heavy)s, false, %(user_type)s, %(actor)s::text, 'commented on reservation #' || n, 'Body',
              timestamptz '2026-09-01 09:00+09' + n * %(heavy_step)s, true, false, false
       FROM generate_series(1, %(heavy_rows)s) n""",
]
PEER_UNREAD_SQL = "UPDATE notifications_notification SET unread = true WHERE recipient_id = %(heavy)s AND id %% 2 = 0"
PEER_USER_TYPE_SQL = "SELECT id FROM django_content_type WHERE app_label = 'auth' AND model = 'user'"


def _conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def run_sql(url: str, statements, params: dict, vacuum: str | None = None) -> None:
    """Run statements in one transaction, then VACUUM ANALYZE `vacuum` (a table, or "" for all) outside it."""
    import psycopg

    with psycopg.connect(_conninfo(url)) as conn:
        for statement in statements:
            conn.execute(statement, params)
    if vacuum is not None:
        with psycopg.connect(_conninfo(url), autocommit=True) as conn:
            conn.execute(f"VACUUM ANALYZE {vacuum}")


def data_params(args) -> dict:
    """The figures both sides' loading statements take."""
    return {
        "users": args.users,
        "per_user": args.per_user,
        "unread": min(UNREAD_PER_USER, args.per_user),
        "heavy": args.users + 1,
        "heavy_rows": args.heavy_rows,
        "actor": args.users + 2,  # the peer's notify.send needs an actor: a user of its own
        # The heavy user's rows spread over the same weeks as everyone's (6 hours apart per row of a typical user),
        # so that their newest are as recent as anyone's: an active user, not one whose history ended long ago.
        "heavy_step": timedelta(hours=6) * args.per_user / args.heavy_rows,
    }


# --- measuring ------------------------------------------------------------------------------------------------------


def samples(fn, repeat: int) -> list[float]:
    """Milliseconds of repeat runs of fn after one warm-up run."""
    fn()
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


EXACT_SQL = sa_text("SELECT count(*) FROM notifications WHERE user_id = :u AND read_at IS NULL")


class HatoSide:
    """Hato's way, in this process: the inbox's queries and services in an app context, as a request runs them."""

    def __init__(self, app, users: dict[str, int]) -> None:
        from app.inbox import queries

        self.app, self.users = app, users
        with app.app_context():
            self.cursor50 = self._deep_cursor(users["heavy"])
            self.counts = {name: queries.unread_counts(uid).personal for name, uid in users.items()}

    @staticmethod
    def _deep_cursor(user_id: int) -> str | None:
        """Walk the list with the app's keyset pagination; the cursor that opens page DEEP_PAGE."""
        from app.extensions import db
        from app.inbox import queries

        cursor = None
        for _ in range(DEEP_PAGE - 1):
            cursor = queries.notification_page(user_id, "all", cursor).next_cursor
            if cursor is None:
                break
        db.session.rollback()
        return cursor

    def run(self, op: str, user: str, repeat: int) -> dict:
        from app.extensions import db
        from app.inbox import queries, service

        uid = self.users[user]
        with self.app.app_context():
            if op == "badge":
                return {"ms": samples(lambda: (queries.unread_counts(uid), db.session.rollback()), repeat)}
            if op == "page1":
                return {"ms": samples(lambda: (queries.notification_page(uid), db.session.rollback()), repeat)}
            if op == "page50":
                page = queries.notification_page(uid, "all", self.cursor50)
                db.session.rollback()
                ms = samples(lambda: (queries.notification_page(uid, "all", self.cursor50), db.session.rollback()),
                             repeat)  # fmt: skip
                return {"ms": ms, "rows": len(page.rows)}
            if op == "exact":  # not what the app runs: every unread row counted, on Hato's schema (the peer's answer)
                return {
                    "ms": samples(lambda: (db.session.execute(EXACT_SQL, {"u": uid}), db.session.rollback()), repeat)
                }
            if op == "mark_all":
                started = time.perf_counter()
                done = service.read_all(uid)
                db.session.commit()
                return {"ms": [(time.perf_counter() - started) * 1000], "changed": done.notifications}
        raise ValueError(op)


def post_batches(port: int, key: str, count: int, batch: int, tag: str) -> dict:
    """POST /v1/notifications for users u1..u<count>, batch recipients per request, one at a time; seconds taken."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    started, accepted = time.perf_counter(), 0
    for first in range(1, count + 1, batch):
        body = {
            "type": "comment",
            "recipients": [f"u{u}" for u in range(first, min(first + batch, count + 1))],
            "title": f"Comment on reservation #{first}",
            "body": "Body",
            "link": f"/reservations/{first}",
            "dedupe_key": f"insert:{tag}:{first}",
        }
        conn.request("POST", "/v1/notifications", json.dumps(body), {**headers, "Idempotency-Key": str(uuid.uuid4())})
        response = conn.getresponse()
        data = response.read()
        if response.status != 202:
            raise SystemExit(f"bench: POST /v1/notifications answered {response.status}: {data[:300]!r}")
        accepted += len(body["recipients"])
    seconds = time.perf_counter() - started
    conn.close()
    return {"seconds": seconds, "created": accepted}


@contextmanager
def bench_lock():
    """Take the shared benchmark lock (waiting for another benchmark to finish)."""
    with open(LOCK_PATH, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Clock:
    """The run's time bound."""

    def __init__(self, limit: float) -> None:
        self.started, self.limit = time.monotonic(), limit

    def check(self, step: str) -> None:
        if time.monotonic() - self.started > self.limit:
            raise SystemExit(f"bench: stopped before {step}: over {self.limit:.0f} s")

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def measure(args, hato: HatoSide, peer: Peer, urls: dict, params: dict, server, key: str, clock: Clock) -> dict:
    """The interleaved rounds: reads, then mark-all (restored between rounds), then inserts."""
    reads = [("badge", "heavy"), ("badge", "typical"), ("page1", "heavy"), ("page1", "typical"), ("page50", "heavy")]
    figures: dict = {(op, user, side): [] for op, user in reads for side in ("hato", "peer")}
    checks: dict = {}
    for r in range(args.rounds):
        clock.check(f"read round {r + 1}")
        for op, user in reads:
            order = ("hato", "peer") if r % 2 == 0 else ("peer", "hato")
            for side in order:
                got = (
                    hato.run(op, user, args.repeat)
                    if side == "hato"
                    else peer.ask(op=op, user=user, repeat=args.repeat)
                )
                figures[(op, user, side)] += got["ms"]
                if op == "badge" and side == "peer":
                    checks[f"peer_unread_{user}"] = got["count"]
                if op == "page50":
                    checks[f"{side}_page50_rows"] = got.get("rows")
        figures.setdefault(("exact", "heavy", "hato"), []).extend(hato.run("exact", "heavy", args.repeat)["ms"])
    for r in range(args.rounds):
        clock.check(f"mark-all round {r + 1}")
        order = ("hato", "peer") if r % 2 == 0 else ("peer", "hato")
        for side in order:
            got = hato.run("mark_all", "heavy", 1) if side == "hato" else peer.ask(op="mark_all", user="heavy")
            figures.setdefault(("mark_all", "heavy", side), []).extend(got["ms"])
            checks[f"{side}_mark_all_changed"] = got["changed"]
        run_sql(urls["hato"], [HATO_UNREAD_SQL], params, vacuum="notifications")
        run_sql(urls["peer"], [PEER_UNREAD_SQL], params, vacuum="notifications_notification")
    for r in range(args.insert_rounds):
        clock.check(f"insert round {r + 1}")
        order = ("hato", "peer") if r % 2 == 0 else ("peer", "hato")
        for side in order:
            if side == "hato":
                got = post_batches(server.port, key, args.inserts, args.batch, f"{r}")
            else:
                got = peer.ask(op="insert", count=args.inserts, batch=args.batch)
            figures.setdefault(("insert", "-", side), []).append(got["seconds"] * 1000)
            checks[f"{side}_inserted"] = got["created"]
    return {"figures": figures, "checks": checks}


ROWS = [
    ("badge", "heavy", "unread count", "badge_ratio"),
    ("badge", "typical", "unread count", "badge_ratio_typical"),
    ("page1", "heavy", "first page of 20", "page1_ratio"),
    ("page1", "typical", "first page of 20", "page1_ratio_typical"),
    ("page50", "heavy", "page 50", "page50_ratio"),
    ("mark_all", "heavy", "mark all read", "mark_all_ratio"),
    ("insert", "-", "insert", "insert_ratio"),
]


def report(result: dict, args, hato: HatoSide, meta: dict) -> dict:
    """Print the table; return the JSON line's figures."""
    figures, checks = result["figures"], result["checks"]
    heavy_unread = args.heavy_rows // 2
    print(
        f"\nSide by side with django-notifications-hq {meta['peer_version']} (Django {meta['django']}), "
        f"PostgreSQL {meta['postgres']}, {os.cpu_count()} CPUs; {args.users:,} users x {args.per_user} "
        f"notifications + one heavy user with {args.heavy_rows:,} ({heavy_unread:,} unread); data loaded in "
        f"{meta['load_s']:.0f} s; medians of {args.rounds} rounds x {args.repeat} runs (mark all: {args.rounds} "
        f"runs; insert: {args.insert_rounds} runs of {args.inserts:,})\n"
    )
    print(f"{'operation':<22}{'user':<9}{'Hato ms':>10}{'peer ms':>11}{'Hato ÷ peer speed':>19}")
    print("-" * 71)
    line: dict = {}
    for op, user, label, key in ROWS:
        hato_ms = statistics.median(figures[(op, user, "hato")])
        peer_ms = statistics.median(figures[(op, user, "peer")])
        ratio = peer_ms / hato_ms if hato_ms else 0.0
        name = label if op != "insert" else f"insert {args.inserts:,}"
        print(f"{name:<22}{user:<9}{hato_ms:>10.2f}{peer_ms:>11.2f}{ratio:>18.2f}x")
        line[key] = round(ratio, 2)
        line[f"{key.replace('_ratio', '')}_ms"] = {"hato": round(hato_ms, 3), "peer": round(peer_ms, 3)}
    hato_rate = args.inserts / (statistics.median(figures[("insert", "-", "hato")]) / 1000)
    peer_rate = args.inserts / (statistics.median(figures[("insert", "-", "peer")]) / 1000)
    print(
        f"\ninsert: Hato {hato_rate:,.0f} notifications/s (POST /v1/notifications, {args.batch} recipients a request, "
        f"gunicorn on 127.0.0.1), the peer {peer_rate:,.0f}/s (notify.send, {args.batch} recipients a call)"
    )
    print(
        f"unread counts: the peer counts every row (heavy {checks.get('peer_unread_heavy')}, typical "
        f"{checks.get('peer_unread_typical')}); Hato's badge stops at {meta['badge_cap']} (heavy "
        f"{hato.counts['heavy']}, typical {hato.counts['typical']}: the badge shows 99+); counting all "
        f"{checks.get('peer_unread_heavy')} on Hato's schema (not what it runs): "
        f"{statistics.median(figures[('exact', 'heavy', 'hato')]):.2f} ms"
    )
    print(
        f"mark all read changed: Hato {checks.get('hato_mark_all_changed')}, the peer "
        f"{checks.get('peer_mark_all_changed')}; page 50 rows: Hato {checks.get('hato_page50_rows')}, the peer "
        f"{checks.get('peer_page50_rows')}; inserted per round: Hato {checks.get('hato_inserted')}, the peer "
        f"{checks.get('peer_inserted')}; run took {meta['run_s']:.0f} s"
    )
    for name, nodes in result.get("peer_plans", {}).items():
        print(f"the peer's plan for the heavy user's {name}: {' > '.join(nodes)}")
    line.update(
        insert_per_s={"hato": round(hato_rate), "peer": round(peer_rate)},
        users=args.users,
        per_user=args.per_user,
        heavy_rows=args.heavy_rows,
        inserts=args.inserts,
        batch=args.batch,
        insert_path="http",
        peer=meta["peer_version"],
        django=meta["django"],
    )
    return line


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=10_000, help="typical users (at least 42)")
    parser.add_argument("--per-user", type=int, default=100, help="notifications per typical user")
    parser.add_argument("--heavy-rows", type=int, default=100_000, help="the heavy user's notifications (half unread)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of reads and of mark-all")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs of each read per side and round")
    parser.add_argument("--inserts", type=int, default=10_000, help="notifications inserted per side and round")
    parser.add_argument("--batch", type=int, default=100, help="recipients per POST / per notify.send call")
    parser.add_argument("--insert-rounds", type=int, default=3, help="interleaved insert rounds")
    parser.add_argument("--redis-db", type=int, default=BENCH_REDIS_DB, help="Redis database (flushed)")
    parser.add_argument("--venv", type=Path, default=VENV, help="the peer's own virtualenv (made if missing)")
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT_SECONDS, help="seconds before it gives up")
    args = parser.parse_args(argv)
    if args.users < TYPICAL_USER:
        parser.error(f"--users must be at least {TYPICAL_USER} (the typical user is user {TYPICAL_USER})")
    if args.inserts > args.users:
        parser.error("--inserts must not exceed --users (one notification per user and round)")
    if not 1 <= args.batch <= 1000:
        parser.error("--batch must be 1 to 1,000 (the API's MAX_RECIPIENTS)")
    if args.heavy_rows < (DEEP_PAGE + 1) * PAGE:
        parser.error(f"--heavy-rows must be at least {(DEEP_PAGE + 1) * PAGE} (page {DEEP_PAGE} must exist)")
    return args


def _prepare_hato(url: str, params: dict) -> str:
    """Migrate Hato's database, load the data, make an API key; return the key."""
    from flask_migrate import upgrade

    from app import create_app
    from app.api_keys.service import create_api_key
    from app.extensions import db, redis

    app = create_app()
    with app.app_context():
        upgrade()
        redis.client().flushdb()
        key = create_api_key(None, "bench-peers")
        db.session.commit()
        db.session.remove()
        db.engine.dispose()
    run_sql(url, HATO_DATA_SQL, params)
    run_sql(url, [HATO_UNREAD_SQL], params, vacuum="")
    return key


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from tests.perf.bench_ingest import Server
    from tests.support.databases import bench_urls, drop_database, fresh_bench_database, recreate_database

    params = data_params(args)
    python = peer_python(args.venv)
    db_url, redis_url = bench_urls(BENCH_DB, args.redis_db)
    peer_url, _ = bench_urls(PEER_DB, args.redis_db)
    urls = {"hato": db_url, "peer": peer_url}
    with bench_lock(), tempfile.TemporaryDirectory(prefix="hato-bench-peers-") as tmp, ExitStack() as stack:
        clock = Clock(args.time_limit)  # from the lock on: waiting for another benchmark is not this one's time
        fresh_bench_database(db_url, redis_url)
        recreate_database(peer_url)
        stack.callback(drop_database, peer_url)
        stack.callback(drop_database, db_url)
        script = write_peer_project(Path(tmp), peer_url, secrets.token_urlsafe(48))
        log = stack.enter_context(open(Path(tmp) / "peer.log", "w"))
        loading = time.monotonic()
        subprocess.run([str(python), str(script), "migrate"], check=True, stderr=log)
        import psycopg

        with psycopg.connect(_conninfo(peer_url)) as conn:
            params["user_type"] = conn.execute(PEER_USER_TYPE_SQL).fetchone()[0]
            postgres = conn.execute("SHOW server_version").fetchone()[0]
        run_sql(peer_url, PEER_DATA_SQL, params)
        run_sql(peer_url, [PEER_UNREAD_SQL], params, vacuum="")
        key = _prepare_hato(db_url, params)
        load_s = time.monotonic() - loading
        print(f"data loaded on both sides in {load_s:.0f} s", flush=True)
        clock.check("the measurements")

        from app import create_app
        from app.inbox.queries import BADGE_CAP

        server = Server(db_url, redis_url, Path(tmp) / "gunicorn.log", 1, 4)
        stack.callback(server.stop)
        users = {"heavy": params["heavy"], "typical": TYPICAL_USER}
        hato = HatoSide(create_app(), users)
        peer = Peer(python, script, log)
        stack.callback(peer.stop)
        setup = peer.ask(op="setup", users=users, actor=params["actor"], recipients=args.inserts)
        peer_version = subprocess.run(
            [str(python), "-c", "import importlib.metadata as m; print(m.version('django-notifications-hq'))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        plans = peer.ask(op="plans", user="heavy")
        result = measure(args, hato, peer, urls, params, server, key, clock)
        result["peer_plans"] = plans
        meta = {
            "peer_version": peer_version,
            "django": setup["django"],
            "postgres": postgres,
            "load_s": load_s,
            "run_s": clock.elapsed(),
            "badge_cap": BADGE_CAP,
        }
        line = report(result, args, hato, meta)
        from redis import Redis

        Redis.from_url(redis_url).flushdb()
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
