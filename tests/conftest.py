"""Test harness: one migrated database per run, a rolled-back transaction per test, real Redis.

Warehouse's discipline: migrate once, roll back each test, build rows with factories. Tests that need
real commits (threads, subprocesses, the browser) are marked `committed` or `e2e`; their tables are
truncated afterwards instead.
"""

from __future__ import annotations

import ast
import builtins
import functools
import os
import secrets
import threading
import time
from contextlib import contextmanager

import pytest
import redis as redis_lib
import sqlalchemy as sa
from flask.testing import FlaskClient
from itsdangerous import URLSafeTimedSerializer
from werkzeug.serving import make_server

os.environ.setdefault("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/hato_test")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("SECRET_KEY", "test-secret")
os.environ.setdefault("HATO_DEV", "1")  # dev mode, as `make test` sets it (app/config.py DEV_MODE)


def _own_stores_per_worker() -> None:
    """Under pytest-xdist each worker gets a database and a Redis database number of its own (gw1: hato_test_gw1,
    two numbers below the run's), so its TRUNCATEs, flushes and pub/sub namespace (derived from the database
    name, app/keyspace.py) never meet the other's. Subprocesses (web, workers) inherit them through os.environ."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or os.environ.get("HATO_TEST_WORKER_STORES") == worker:
        return  # not under xdist, or done already (a subprocess that imports this module inherits both)
    os.environ["HATO_TEST_WORKER_STORES"] = worker
    n = int(worker[2:])
    os.environ["DATABASE_URL"] = f"{os.environ['DATABASE_URL']}_{worker}"
    base, _, number = os.environ["REDIS_URL"].rpartition("/")
    if number.isdigit():  # 15, 13, 11…: two apart, so a test's "other database" (number ^ 1) is nobody's
        os.environ["REDIS_URL"] = f"{base}/{max(1, int(number) - 2 * n)}"


_own_stores_per_worker()


def _parses_take_turns() -> None:
    """ast.parse, and compile() to or from a tree, under one lock for every caller in the test process (werkzeug
    compiling a route, a traceback's carets, the tests that read the sources).

    CPython 3.11 keeps the AST builder's recursion counter per interpreter, not per call (python/cpython#106905):
    a parse in one thread while another thread parses (the live servers' threads format tracebacks, and 3.11 parses
    for their carets) ends with "SystemError: AST constructor recursion depth mismatch", failing whichever test
    was creating an app or reading a file then. Reentrant: a parse may run a finalizer that parses.
    """
    original, original_compile = ast.parse, builtins.compile
    if getattr(original, "takes_turns", False):
        return
    lock = threading.RLock()

    @functools.wraps(original)
    def parse(*args, **kwargs):
        with lock:
            try:
                return original(*args, **kwargs)
            except SystemError as exc:  # a caller that bound ast.parse before this patch can still race: the
                if "recursion depth mismatch" not in str(exc):  # mismatch is transient, and a second parse meets
                    raise  # a settled counter
            return original(*args, **kwargs)

    # compile() uses the same counter when it is given a tree (werkzeug compiles each route's builder that way)
    # or asked for one, so those calls take turns too; compiling source to code does not touch it.
    @functools.wraps(original_compile)
    def compile_(source, filename, mode, flags=0, *args, **kwargs):
        if isinstance(source, ast.AST) or flags & ast.PyCF_ONLY_AST:
            with lock:
                return original_compile(source, filename, mode, flags, *args, **kwargs)
        return original_compile(source, filename, mode, flags, *args, **kwargs)

    parse.takes_turns = True
    ast.parse, builtins.compile = parse, compile_


_parses_take_turns()

from app import create_app, unitofwork  # noqa: E402
from app.auth import sessions  # noqa: E402
from app.extensions import db, limiter  # noqa: E402
from tests.factories import TEST_PASSWORD  # noqa: E402
from tests.support.databases import recreate_database  # noqa: E402
from tests.support.waiting import free_port  # noqa: E402

# A local push service answers on http://127.0.0.1 in the tests (production endpoints are https, on the
# public push services, never at a loopback or private address: tests/security/test_push_ssrf.py).
TEST_CONFIG = {
    "TESTING": True,
    "SERVER_NAME": None,
    "METRICS_CACHE_SECONDS": 0,  # every scrape recomputed, so tests see their own rows
    "PUSH_ALLOW_HTTP_ENDPOINTS": True,
    "PUSH_ALLOWED_HOSTS": "127.0.0.1,localhost",
    "PUSH_ALLOW_PRIVATE_ADDRESSES": True,
}

# Shared fixtures (SMTP sink, push service, ledger rows) live in tests/support and are available everywhere.
pytest_plugins = [
    "tests.support.smtp",
    "tests.support.push",
    "tests.support.fcm_server",
    "tests.support.delivery",
    "tests.support.redis_watch",
    "tests.support.websockets",
]


@pytest.fixture(scope="session")
def database_url() -> str:
    """The test database, recreated and migrated once per run."""
    url = os.environ["DATABASE_URL"]
    recreate_database(url)
    return url


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The test Redis database, flushed once per run (never db 0, never FLUSHALL)."""
    url = os.environ["REDIS_URL"]
    client = redis_lib.Redis.from_url(url)
    if client.connection_pool.connection_kwargs.get("db", 0) == 0:
        raise RuntimeError("tests use their own Redis database number; REDIS_URL points at db 0")
    client.flushdb()
    return url


class SettledClient(FlaskClient):
    """A test client that returns once the request's post-commit effects (jobs, badge events) have run.

    They run on the dispatcher thread (app/unitofwork.py); waiting for it keeps assertions deterministic.
    """

    def open(self, *args, **kwargs):
        response = super().open(*args, **kwargs)
        assert unitofwork.wait_idle(self.application, 10), "post-commit effects still running after 10 s"
        return response


@pytest.fixture(scope="session")
def app(database_url, redis_url):
    """The app under test, with the schema migrated to head."""
    from flask_migrate import upgrade

    application = create_app(dict(TEST_CONFIG))
    application.test_client_class = SettledClient
    with application.app_context():
        upgrade()
    application.limiter_state = (limiter._storage, limiter._limiter)  # type: ignore[attr-defined]
    return application


def _needs_commits(request) -> bool:
    return any(request.node.get_closest_marker(m) for m in ("committed", "e2e", "chaos"))


# Other sessions of this database inside a transaction: rows they have not committed are invisible to the probe.
BUSY_SQL = sa.text(
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
    "AND backend_type = 'client backend' AND state <> 'idle'"
)
# The sequences a test moved (RESTART IDENTITY's part, for the tables that were not truncated).
RESTART_SEQUENCES_SQL = sa.text(
    "SELECT setval(format('%I.%I', schemaname, sequencename)::regclass, start_value, false) FROM pg_sequences "
    "WHERE schemaname = current_schema() AND last_value IS NOT NULL"
)


def restart_sequences(application) -> None:
    """Every sequence a test moved back to its start, when no table holds a row (so no id can be given twice)."""
    with application.app_context():
        names = [t.name for t in db.metadata.sorted_tables]
        probe = sa.text(" UNION ALL ".join(f"SELECT 1 WHERE EXISTS (SELECT 1 FROM {name})" for name in names))
        if db.session.execute(probe).first() is None:
            db.session.execute(RESTART_SEQUENCES_SQL)
        db.session.commit()
        db.session.remove()


def truncate_all(application, attempts: int = 5) -> None:
    """Empty every table (used after tests that really commit).

    Only the tables holding rows are truncated (the probe reads one row of each, a few ms): a TRUNCATE of all 47
    costs ~0.9 s even when they are empty (new files for every table and index), and 400 tests commit. When another
    session is inside a transaction its rows may not be visible yet, so everything is truncated as before.
    A live-server thread or a worker may still be finishing a request that touches these tables;
    TRUNCATE then waits for (or deadlocks with) it, so give up the lock quickly and try again.
    """
    names = [t.name for t in reversed(db.metadata.sorted_tables)]
    probe = sa.text(" UNION ALL ".join(f"SELECT '{name}' WHERE EXISTS (SELECT 1 FROM {name})" for name in names))
    with application.app_context():
        for attempt in range(attempts):
            try:
                db.session.execute(sa.text("SET LOCAL lock_timeout = '3s'"))
                busy = db.session.execute(BUSY_SQL).scalar_one()
                tables = names if busy else db.session.execute(probe).scalars().all()
                if tables:
                    db.session.execute(sa.text(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE"))
                db.session.execute(RESTART_SEQUENCES_SQL)
                db.session.commit()
                break
            except sa.exc.OperationalError:
                db.session.rollback()
                if attempt == attempts - 1:
                    raise
                time.sleep(0.5 * (attempt + 1))
        db.session.remove()


@pytest.fixture(autouse=True)
def db_session(request, app):
    """Run the test inside a transaction that is rolled back afterwards.

    The app's engine is swapped for one connection in an open transaction; the session joins it
    with savepoints, so code under test may commit() and the test still leaves nothing behind.
    Tests marked committed (code that needs its own connections: threads, processes, the delivery
    engine's send ledger) run in an app context on the real engine, and the tables are emptied after. Their ids
    start at 1 (some seed rows by id): the rolled-back tests before them moved the sequences, which roll back never.
    """
    if _needs_commits(request):
        restart_sequences(app)
        with app.app_context():
            yield db.session
            db.session.remove()
        truncate_all(app)
        return
    with app.app_context():
        connection = db.engines[None].connect()
        transaction = connection.begin()
        try:
            with session_bound_to(connection) as session:
                yield session
        finally:
            transaction.rollback()
            connection.close()


@contextmanager
def session_bound_to(connection):
    """Point the app's engine at connection (in an open transaction); the session joins it with savepoints."""
    engines = db.engines
    engine = engines[None]
    engines[None] = connection
    db.session.remove()
    db.session.configure(join_transaction_mode="create_savepoint")
    try:
        yield db.session
    finally:
        db.session.remove()
        engines[None] = engine


@pytest.fixture(autouse=True)
def _fresh_redis(app):
    """Each test starts with an empty test Redis db: no jobs, rate-limit windows or breakers from another test.

    Flask-Limiter keeps one storage per Limiter object, and a test that builds a second app (say,
    with an unreachable Redis) re-points it; restore the main app's storage first.
    """
    limiter._storage, limiter._limiter = app.limiter_state
    # A hand-off the last test committed may still be running on the dispatcher thread: let it land before the
    # flush, not after it (it once put a second job on the next test's queue).
    unitofwork.wait_idle(app, 10)
    with app.app_context():
        from app.extensions import redis

        client = redis.client()
        assert client.connection_pool.connection_kwargs.get("db", 0) != 0, "tests never touch Redis db 0"
        client.flushdb()
        limiter.reset()
    yield


@pytest.fixture(autouse=True)
def _fresh_switches():
    """Each test reads the kill switches afresh (a process caches them for a second; tables are emptied between),
    and the sweeper's due walk starts from the start."""
    from app.delivery import switches
    from app.sweeper import DUE_CURSOR

    switches.forget()
    DUE_CURSOR.after = None  # the sweeper's due walk starts from the start in every test
    yield
    switches.forget()


@pytest.fixture
def statements(app, monkeypatch):
    """The SQL statements the code under test sends (to prove how many it takes).

    The webhook subscriptions' per-process cache is read now and kept for the test: on a slow machine it
    could otherwise expire mid-test and count one more statement.
    """
    from app.webhooks import service as webhooks

    monkeypatch.setattr(webhooks, "SUBSCRIBED_CACHE_SECONDS", 3600.0)
    webhooks.forget_subscriptions()
    webhooks.subscribed_types()
    sent: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        sent.append(statement)

    engine = db.engine if isinstance(db.engine, sa.engine.Engine) else db.engine.engine
    sa.event.listen(engine, "before_cursor_execute", record)
    yield sent
    sa.event.remove(engine, "before_cursor_execute", record)
    webhooks.forget_subscriptions()


@pytest.fixture
def redis_client(app):
    """The test Redis db (empty at the start of every test, see _fresh_redis)."""
    from app.extensions import redis

    with app.app_context():
        return redis.client()


@pytest.fixture
def client(app):
    """A test client."""
    return app.test_client()


def csrf_token_for(app, client) -> str:
    """Return a valid CSRF token for client's session (what Flask-WTF would render)."""
    with client.session_transaction() as sess:
        raw = sess.setdefault("csrf_token", secrets.token_hex(20))
    return URLSafeTimedSerializer(app.secret_key, salt="wtf-csrf-token").dumps(raw)


@pytest.fixture
def csrf(app, client):
    """Call csrf() for headers carrying a valid X-CSRFToken for the test client's session."""
    return lambda: {"X-CSRFToken": csrf_token_for(app, client)}


@pytest.fixture
def login_as(client):
    """Sign the test client in as user (without going through the form)."""

    def _login(user):
        with client.session_transaction() as sess:
            sess["_user_id"] = str(user.id)
            sess["_fresh"] = True
            sess.update(sessions.stamp(user.id, user.session_version))  # as a sign-in stamps it (issue 14)
        return user

    return _login


@pytest.fixture
def password() -> str:
    """The password every factory-built user has."""
    return TEST_PASSWORD


# --- live server and browser --------------------------------------------------------------------


@pytest.fixture(scope="session")
def live_server(database_url, redis_url, app):
    """A real threaded HTTP server running its own app instance (real commits) on a free port."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    live_app = create_app(dict(TEST_CONFIG, BASE_URL=base_url, TESTING=False))
    server = make_server("127.0.0.1", port, live_app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    live_app.base_url = base_url  # type: ignore[attr-defined]
    yield live_app
    server.shutdown()
    thread.join(timeout=5)


@pytest.fixture(scope="session")
def base_url(live_server) -> str:
    """pytest-playwright navigates relative URLs against this."""
    return live_server.base_url


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """Launch Debian's Chromium headless (Playwright's own browser download is not available)."""
    return {
        **browser_type_launch_args,
        "executable_path": os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"),
        "headless": True,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ],
    }
