"""Unbound extension singletons, bound to an app in init_app(). No I/O at import."""

from __future__ import annotations

from collections.abc import Mapping

import redis as redis_lib
from flask import Flask, current_app
from flask_babel import Babel
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sock import Sock
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect
from redis.cluster import RedisCluster
from sqlalchemy import MetaData

from app import dbpool, keyspace, ratelimit_storage

# Deterministic constraint names so Alembic migrations stay reviewable.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
}

db = SQLAlchemy(metadata=MetaData(naming_convention=NAMING_CONVENTION))
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
        channels, socket caps, breakers and buckets. RQ's queues stay on REDIS_URL (RQ does not run on
        a cluster). A RedisCluster client answers the same commands; keys one script touches share a
        hash tag (app/keyspace.py tagged()).
        """
        config = config if config is not None else current_app.config
        url, cluster = config["REALTIME_REDIS_URL"], bool(config["REALTIME_REDIS_CLUSTER"])
        client = self._clients.get(("cluster", url) if cluster else url)
        if client is None and cluster:
            client = RedisCluster.from_url(url, socket_timeout=5, socket_connect_timeout=2)
            self._clients[("cluster", url)] = client
        return client if client is not None else self.client(url)


def is_cluster(client) -> bool:
    """True for a Redis Cluster client (sharded pub/sub, per-slot pipelines)."""
    return isinstance(client, RedisCluster)


redis = RedisHandle()


def limiter_storage_uri(redis_url: str) -> str:
    """Translate REDIS_URL into the URI of app/ratelimit_storage.py (unix sockets: hato+redis+unix://)."""
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
    app.config.setdefault("RATELIMIT_STORAGE_URI", limiter_storage_uri(app.config["REDIS_URL"]))
    app.config.setdefault("RATELIMIT_KEY_PREFIX", keyspace.key("limits", config=app.config))
    limiter.init_app(app)
    redis.init_app(app)
