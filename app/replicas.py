"""Read replicas (DATABASE_REPLICA_URLS) with read-your-writes: `read(user_id, fn)` runs fn's queries on one.

Nothing is routed by magic: only the reads that may be a moment behind (the inbox page, the feed's list, the
counts on (re)connect, the console's delivery log and analytics) call read(); everything else, every write and
every read inside a writing request, stays on the primary. Inside read(), db.session is a session bound to the
chosen replica, so the domain's queries run unchanged; they return rows and mappings, never lazy objects.

Read-your-writes: a request that committed a write (its transaction had an xid) records a WAL position of the
primary covering that commit afterwards under its member's key in the realtime store, for REPLICA_MAX_LAG_SECONDS + 1 s
(after that any replica still in use has replayed it: it is skipped when further behind). A replica answers
for that member only once pg_last_wal_replay_lsn() has reached it; otherwise the read goes to the primary.

Health: each replica is probed at most once a second per process (DOWN_RETRY_SECONDS after a connect error).
It is skipped while down, not a standby (a promoted one no longer follows the primary), or lagging: behind the
primary's WAL and its last replayed commit older than REPLICA_MAX_LAG_SECONDS. The timestamp alone would call
a replica of an idle primary late, so a replica that has replayed all the primary has written is never late.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import psycopg
import sqlalchemy as sa
from flask import Flask, current_app, g, has_request_context, request
from flask_login import current_user

from app import dbpool, keyspace
from app.config import sqlalchemy_url
from app.extensions import REALTIME_ERRORS, db, redis

log = logging.getLogger(__name__)

T = TypeVar("T")
# A standby cancels a query that holds back replay (hot standby conflicts): that read is retried on the primary,
# but the replica is not down.
RECOVERY_CONFLICTS = (psycopg.errors.SerializationFailure, psycopg.errors.QueryCanceled)
EXTENSION_KEY = "hato_replicas"
HEALTH_SECONDS = 1.0  # how long a probe's answer is trusted
DOWN_RETRY_SECONDS = 5.0  # a replica that refused a connection is not asked again sooner
PRIMARY = "primary"

PROBE_SQL = sa.text(
    "SELECT pg_is_in_recovery() AS standby, (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint AS replayed, "
    "extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS behind_seconds"
)
# Standbys receive only flushed WAL, so the primary's flush position is what "caught up" means.
PRIMARY_LSN_SQL = sa.text("SELECT (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint")
# A member's commit: with synchronous commit it was flushed before it returned, so the flush position covers it
# (the insert position would also wait for unrelated WAL still in buffers: seconds on an idle primary); an
# asynchronous commit may not be flushed yet, so the insert position.
WRITTEN_LSN_SQL = sa.text(
    "SELECT (CASE WHEN current_setting('synchronous_commit') = 'off' THEN pg_current_wal_insert_lsn() "
    "ELSE pg_current_wal_flush_lsn() END - '0/0'::pg_lsn)::bigint"
)
REPLAYED_SQL = sa.text("SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint >= :needed")
WROTE_SQL = sa.text("SELECT pg_current_xact_id_if_assigned() IS NOT NULL")
# Keep the highest position (two requests of one member may finish out of order) and refresh the TTL.
REMEMBER_LUA = """
local known = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > known then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
else redis.call('EXPIRE', KEYS[1], ARGV[2]) end
"""


@dataclass(frozen=True)
class Health:
    """What the last probe of a replica found."""

    state: str  # ok, lagging, down or primary (not a standby)
    replayed: int = 0
    behind_seconds: float | None = None
    checked_at: float = float("-inf")


class Replica:
    """One replica: its engine (no I/O until first use) and its last probe."""

    def __init__(self, name: str, url: str, options: dict) -> None:
        self.name = name
        self.engine = sa.create_engine(sqlalchemy_url(url), connect_args={"connect_timeout": 2}, **options)
        dbpool.install(self.engine)
        self.health = Health("unknown")
        self.lock = threading.Lock()

    def mark_down(self) -> None:
        """Skip this replica until DOWN_RETRY_SECONDS have passed."""
        self.health = Health("down", checked_at=time.monotonic())


class ReplicaSet:
    """The app's replicas, their health, and how many reads each server answered in this process."""

    def __init__(self, urls: list[str], options: dict) -> None:
        self.replicas = [Replica(f"replica{i}", url, options) for i, url in enumerate(urls)]
        self.reads: Counter[str] = Counter()

    def health(self, replica: Replica, max_lag: float) -> Health:
        """The replica's health, probed again once the last answer is too old (one thread probes at a time)."""
        current = replica.health
        age = time.monotonic() - current.checked_at
        if age < (DOWN_RETRY_SECONDS if current.state == "down" else HEALTH_SECONDS):
            return current
        if not replica.lock.acquire(blocking=False):
            return current  # another thread is probing: use what is known
        try:
            replica.health = _probe(replica, max_lag)
            if replica.health.state != current.state:
                log.info("replica %s is %s (was %s)", replica.name, replica.health.state, current.state)
            return replica.health
        finally:
            replica.lock.release()

    def choose(self, needed: int, max_lag: float) -> tuple[Replica | None, bool]:
        """A healthy replica, preferring one known to have replayed up to needed (a WAL position), and whether it
        is known to have; (None, False) for the primary."""
        candidates = self.replicas[:]
        random.shuffle(candidates)
        unproven = None
        for replica in candidates:
            health = self.health(replica, max_lag)
            if health.state == "ok":
                if health.replayed >= needed:
                    return replica, True
                unproven = unproven or replica
        return unproven, False

    def forget(self) -> None:
        """Probe every replica again on next use (tests, and after a configuration change)."""
        for replica in self.replicas:
            replica.health = Health("unknown")


def _probe(replica: Replica, max_lag: float) -> Health:
    now = time.monotonic()
    try:
        with replica.engine.connect() as conn:
            row = conn.execute(PROBE_SQL).one()
        if not row.standby:
            return Health(PRIMARY, checked_at=now)
        primary_lsn = _primary_lsn()
    except dbpool.UNAVAILABLE as error:
        log.warning("replica %s is down: %s", replica.name, type(error).__name__)
        return Health("down", checked_at=now)
    behind = row.replayed < primary_lsn
    late = behind and (row.behind_seconds is None or row.behind_seconds > max_lag)
    return Health("lagging" if late else "ok", row.replayed, row.behind_seconds, now)


def _primary_lsn(statement: sa.TextClause = PRIMARY_LSN_SQL) -> int:
    """A WAL position of the primary, on a connection of its own (the request's session is left alone)."""
    with db.engine.connect() as conn:
        return conn.execute(statement).scalar_one()


def replica_set(app: Flask | None = None) -> ReplicaSet | None:
    """The app's replicas, or None when DATABASE_REPLICA_URLS is empty."""
    return (app or current_app).extensions.get(EXTENSION_KEY)


def _lsn_key(user_id: int) -> str:
    return keyspace.key("replicas", "lsn", user_id)


def _needed(user_id: int | None) -> int | None:
    """The WAL position the member's last write reached (0: none recently), or None if it cannot be known."""
    if user_id is None:
        return 0
    try:
        value = redis.realtime().get(_lsn_key(user_id))
    except REALTIME_ERRORS:
        return None  # unknown: the primary is always right
    return int(value) if value else 0


def _writing() -> bool:
    """True inside a request that committed a write already, or with unflushed changes in its session."""
    if has_request_context() and g.get("hato_wrote"):
        return True
    if not db.session.registry.has():
        return False
    session = db.session()
    return bool(session.new or session.dirty or session.deleted)


def read(user_id: int | None, fn: Callable[[], T]) -> T:
    """Return fn() run on a replica that may answer for user_id, else on the primary.

    A replica whose last probe is older than the member's last write is asked on the read's own connection
    whether it has replayed that far (replay only moves forward). When a replica fails during the read, fn runs
    again on the primary; the replica is marked down unless the standby only cancelled the query (a recovery
    conflict).
    """
    replicas = replica_set()
    if replicas is None:
        return fn()
    needed = None if _writing() else _needed(user_id)
    replica, proven = (None, False)
    if needed is not None:
        replica, proven = replicas.choose(needed, current_app.config["REPLICA_MAX_LAG_SECONDS"])
    if replica is not None:
        try:
            result = _on(replica, fn, 0 if proven else needed)
        except _NotReplayed:
            pass
        except dbpool.UNAVAILABLE as error:
            log.warning("replica %s failed a read (%s): reading from the primary", replica.name, type(error).__name__)
            if not isinstance(getattr(error, "orig", None), RECOVERY_CONFLICTS):
                replica.mark_down()
        else:
            replicas.reads[replica.name] += 1
            _answered(replica.name)
            return result
    replicas.reads[PRIMARY] += 1
    _answered(PRIMARY)
    return fn()


class _NotReplayed(Exception):
    """The replica has not replayed the member's last write yet."""


def _answered(server: str) -> None:
    if has_request_context():
        g.hato_read_from = server  # for logs and tests: which server answered this request's last read


def _on(replica: Replica, fn: Callable[[], T], needed: int) -> T:
    """Run fn with db.session bound to replica, once it has replayed up to needed (the request's own session is
    put back afterwards)."""
    registry = db.session.registry
    previous = registry() if registry.has() else None
    session = sa.orm.Session(bind=replica.engine)
    registry.set(session)
    try:
        if needed and not session.execute(REPLAYED_SQL, {"needed": needed}).scalar_one():
            raise _NotReplayed
        return fn()
    finally:
        session.close()
        if previous is None:
            registry.clear()
        else:
            registry.set(previous)


# --- recording a member's writes --------------------------------------------------------------------


def _check_write(session) -> None:
    """Before a request's commit: note whether its transaction wrote anything (it then has an xid)."""
    if not has_request_context() or replica_set() is None or g.get("hato_wrote"):
        return
    # No member to remember it for (the API's keys, sign-in pages): no round trip, e.g. on every ingest.
    if _writer_id() is not None and session.execute(WROTE_SQL).scalar_one():
        g.hato_wrote = True


def _writer_id() -> int | None:
    """Who the request speaks for: the feed token's member (app/feed/views.py), else the signed-in user."""
    feed_user = getattr(request, "hato_feed_user", None)
    if feed_user is not None:
        return feed_user.user_id
    if current_user and current_user.is_authenticated:
        return int(current_user.get_id())
    return None


def _remember_write(response):
    """After a request that wrote: keep the primary's WAL position under its member's key."""
    if not g.get("hato_wrote") or replica_set() is None:
        return response
    user_id = _writer_id()
    if user_id is None:
        return response
    try:
        lsn = _primary_lsn(WRITTEN_LSN_SQL)
        ttl = int(current_app.config["REPLICA_MAX_LAG_SECONDS"]) + 1
        redis.realtime().eval(REMEMBER_LUA, 1, _lsn_key(user_id), lsn, ttl)
    except (*dbpool.UNAVAILABLE, *REALTIME_ERRORS) as error:
        log.warning("could not record a member's last write for the replicas: %s", type(error).__name__)
    return response


def init_app(app: Flask) -> None:
    """Create the replicas' engines (if any) and record members' writes."""
    urls = app.config["DATABASE_REPLICA_URLS"]
    if not urls:
        return
    app.extensions[EXTENSION_KEY] = ReplicaSet(urls, dict(app.config["SQLALCHEMY_ENGINE_OPTIONS"]))
    app.after_request(_remember_write)
    if not sa.event.contains(db.session, "before_commit", _check_write):
        sa.event.listen(db.session, "before_commit", _check_write)
