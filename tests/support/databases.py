"""Scratch databases on the server the environment names: the test database and each benchmark's own."""

from __future__ import annotations

import os
import secrets
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg

from app.config import KNOWN_SECRETS, SECRET_MIN_BYTES
from app.i18n import compile_stale_catalogs


def maintenance_conninfo(url: str) -> str:
    """Return a libpq conninfo for the `postgres` database on the same server as url."""
    params = psycopg.conninfo.conninfo_to_dict(url)
    params["dbname"] = "postgres"
    return psycopg.conninfo.make_conninfo(**params)


def bench_urls(db_name: str, redis_db: int) -> tuple[str, str]:
    """Return (DATABASE_URL, REDIS_URL) for db_name / redis_db on the servers in the environment."""
    db = urlsplit(os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/hato"))
    redis = urlsplit(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    if redis.scheme == "unix":
        redis_url = urlunsplit((redis.scheme, redis.netloc, redis.path, f"db={redis_db}", ""))
    else:
        redis_url = urlunsplit((redis.scheme, redis.netloc, f"/{redis_db}", "", ""))
    return urlunsplit((db.scheme, db.netloc, f"/{db_name}", db.query, "")), redis_url


def bench_environment(db_url: str, redis_url: str | None = None) -> None:
    """Point this process, and every process it starts, at a benchmark's services; ready them as `make bench` does.

    A benchmark runs as `python -m tests.perf.<name>` from a plain shell, so the workers and web processes it
    starts pass the production start-up check (wsgi.py): a SECRET_KEY of its own for this run (random, 48
    bytes) unless the shell holds a real one, and the catalogs compiled.
    """
    os.environ["DATABASE_URL"] = db_url
    if redis_url is not None:
        os.environ["REDIS_URL"] = redis_url
    key = os.environ.get("SECRET_KEY", "")
    if len(key.encode()) < SECRET_MIN_BYTES or key.strip().lower() in KNOWN_SECRETS:
        os.environ["SECRET_KEY"] = secrets.token_urlsafe(48)
    compile_stale_catalogs()


def fresh_bench_database(db_url: str, redis_url: str | None = None) -> None:
    """A benchmark's start: its environment (bench_environment), then its scratch database, empty."""
    bench_environment(db_url, redis_url)
    recreate_database(db_url)


# Only databases whose names say they are scratch space may be dropped by the suite or a benchmark.
SCRATCH_MARKERS = ("_test", "_bench")


def database_name(url: str) -> str:
    """Return the database name in a postgresql:// URL."""
    return urlsplit(url).path.lstrip("/")


def _scratch(url: str) -> str:
    name = database_name(url)
    if not any(marker in name for marker in SCRATCH_MARKERS):
        raise RuntimeError(f"refusing to drop {name!r}: scratch databases have _test or _bench in their name")
    return name


def drop_database(url: str) -> None:
    """Drop the scratch database named in url, if it exists."""
    name = _scratch(url)
    with psycopg.connect(maintenance_conninfo(url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def recreate_database(url: str) -> None:
    """Drop and create the database named in url (empty, ready for migrations)."""
    drop_database(url)
    name = database_name(url)
    with psycopg.connect(maintenance_conninfo(url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')


def run_outside_transaction(db, *statements: str) -> None:
    """Run VACUUM / CHECKPOINT (which refuse a transaction) on their own autocommit connection."""
    with db.engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        for statement in statements:
            conn.exec_driver_sql(statement)


def row_counts(db, sa, sql: str) -> dict:
    """Return the one row of a counting statement as a dict, on a fresh transaction."""
    db.session.rollback()
    return dict(db.session.execute(sa.text(sql)).mappings().one())


@contextmanager
def bench_database(db_name: str, redis_db: int, reuse_own: bool = False):
    """Point DATABASE_URL/REDIS_URL at a fresh scratch database for a benchmark; drop it afterwards.

    With reuse_own, a DATABASE_URL whose name already says it is bench scratch space (`_bench`) is used as is.
    """
    db_url, redis_url = bench_urls(db_name, redis_db)
    own = os.environ.get("DATABASE_URL", "")
    if reuse_own and own and "_bench" in database_name(own):
        db_url = own
    fresh_bench_database(db_url, redis_url)
    try:
        yield db_url
    finally:
        drop_database(db_url)
