"""Unbound extension singletons, bound to an app in init_app(). No I/O at import."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar

import redis as redis_lib
import sqlalchemy as sa
from flask import Flask, current_app
from flask_babel import Babel
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sock import Sock
from flask_sqlalchemy import SQLAlchemy
from flask_sqlalchemy.session import Session as FlaskSession
from flask_wtf import CSRFProtect
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException
from sqlalchemy import MetaData

from app import clusterclient, dbpool, keyspace, ratelimit_storage

# Deterministic constraint names so Alembic migrations stay reviewable.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
}

# While a unit of work holds a connection of its own (app/unitofwork.py on_connection()), this gives it: its
# transaction's connection, begun on first use. The session and app/driversql.py both run there.
unit_connection: ContextVar[Callable[[], sa.Connection] | None] = ContextVar("hato_unit_connection", default=None)


class Session(FlaskSession):
    """The app's ORM session: inside a unit of work on its own connection, it joins that connection's transaction."""

    def get_bind(self, mapper=None, clause=None, bind=None, **kwargs):
        """The unit of work's connection while one is open (its transaction is joined, never committed by the
        session: SQLAlchemy's "rollback_only" join), else Flask-SQLAlchemy's engine."""
        connection = unit_connection.get()
        if bind is None and connection is not None:
            return connection()
        return super().get_bind(mapper, clause, bind, **kwargs)


db = SQLAlchemy(metadata=MetaData(naming_convention=NAMING_CONVENTION), session_options={"class_": Session})
migrate = Migrate()
login = LoginManager()
csrf = CSRFProtect()
sock = Sock()
babel = Babel()  # bound by app/web/i18n.py, which owns the locale and zone selectors
limiter = Limiter(key_func=get_remote_address, in_memory_fallback_enabled=True)


class RedisHandle:
    """One lazily created Redis client per process, shared by every thread (redis-py pools)."""

    def __init__(self) -> None:
        self._clients: dict = {}

    def init_app(self, app: Flask) -> None:
        app.extensions["hato_redis"] = self

    def client(self, url: str | None = None) -> redis_lib.Redis:
        """Return the client for REDIS_URL (or url), creating it on first use."""
        url = url or current_app.config["REDIS_URL"]
        client = self._clients.get(url)
        if client is None:
            client = redis_lib.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2, health_check_interval=30)
            self._clients[url] = client
        return client

    def realtime(self, config: Mapping | None = None) -> redis_lib.Redis:
        """Return the client of the realtime store (REALTIME_REDIS_URL: a Redis, or a node of a Redis Cluster).

        It holds what every web process must agree on fast: the connection registry, presence, node
        channels, socket caps, breakers, buckets and rate limits. RQ's queues stay on REDIS_URL (RQ does not
        run on a cluster). A RedisCluster client answers the same commands; keys one script touches share a
        hash tag (app/keyspace.py tagged()). While no node of the cluster answers, a stand-in whose every call
        raises ConnectionError (app/clusterclient.py), as a Redis client's do while its server is away.
        """
        config = config if config is not None else current_app.config
        url, cluster = config["REALTIME_REDIS_URL"], bool(config["REALTIME_REDIS_CLUSTER"])
        client = self._clients.get(("cluster", url) if cluster else url)
        if client is None and cluster:
            try:
                client = self._clients[("cluster", url)] = clusterclient.connect(url)
            except redis_lib.ConnectionError:
                return clusterclient.LazyCluster(url)  # not kept: the next call asks the cluster again
        return client if client is not None else self.client(url)


def is_cluster(client) -> bool:
    """True for a Redis Cluster client (sharded pub/sub, per-slot pipelines)."""
    return isinstance(client, RedisCluster | clusterclient.LazyCluster)


# What a call to the realtime store may raise when it (or one cluster node) is away: RedisError, and on a
# cluster also RedisClusterException (e.g. a slot left uncovered mid-failover), which is not a RedisError.
REALTIME_ERRORS = (redis_lib.RedisError, RedisClusterException)


redis = RedisHandle()


def limiter_storage_uri(redis_url: str, cluster: bool = False) -> str:
    """Translate a Redis URL into the URI of app/ratelimit_storage.py (unix sockets: hato+redis+unix://; a
    node of a Redis Cluster: hato+redis+cluster://, or hato+rediss+cluster:// over TLS)."""
    if cluster:
        scheme, rest = redis_url.split("://", 1)
        return f"{ratelimit_storage.SCHEME_PREFIX}{scheme}+cluster://{rest}"
    if redis_url.startswith("unix://"):
        redis_url = "redis+unix://" + redis_url[len("unix://") :]
    return ratelimit_storage.SCHEME_PREFIX + redis_url


def init_app(app: Flask) -> None:
    """Bind every extension to app."""
    db.init_app(app)
    with app.app_context():
        dbpool.install(db.engine)
    migrate.init_app(app, db, directory=str(app.root_path + "/../migrations"))
    login.init_app(app)
    login.login_view = "auth.login"
    login.login_message = None
    csrf.init_app(app)
    sock.init_app(app)
    # The rate limits count in the realtime store, beside the breakers and buckets (docs/high-availability.md).
    storage_uri = limiter_storage_uri(app.config["REALTIME_REDIS_URL"], bool(app.config["REALTIME_REDIS_CLUSTER"]))
    app.config.setdefault("RATELIMIT_STORAGE_URI", storage_uri)
    app.config.setdefault("RATELIMIT_KEY_PREFIX", keyspace.key("limits", config=app.config))
    limiter.init_app(app)
    redis.init_app(app)
