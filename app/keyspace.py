"""One installation's names in Redis: every key, pub/sub channel, RQ queue and job id carries its namespace.

Redis pub/sub ignores the database number, so a staging and a production Hato on one Redis server
(db 1 and db 0) would otherwise hear each other's badge events, toasts included; on one database
number they would also share queues, buckets and breakers. The namespace is REDIS_NAMESPACE, or is
derived from DATABASE_URL's host, port and database name (so every process of one installation
derives the same one as long as they spell DATABASE_URL alike; set REDIS_NAMESPACE if they do not).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from flask import current_app

PREFIX = "hato"
NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def derive_namespace(database_url: str) -> str:
    """Return `<database>-<8 hex of host:port/database>` for DATABASE_URL."""
    parts = urlsplit(database_url)
    database = parts.path.lstrip("/") or "hato"
    try:
        port = parts.port or 5432
    except ValueError:
        port = 5432
    digest = hashlib.sha256(f"{parts.hostname or ''}:{port}/{database}".encode()).hexdigest()[:8]
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", database)[:40]
    return f"{readable}-{digest}"


def namespace(config: Mapping | None = None) -> str:
    """Return this installation's namespace (config defaults to the current app's)."""
    return (config if config is not None else current_app.config)["REDIS_NAMESPACE"]


def key(*parts: object, config: Mapping | None = None) -> str:
    """Return the Redis key or channel `hato:<namespace>:<parts…>`."""
    return ":".join((PREFIX, namespace(config), *(str(part) for part in parts)))


def tagged(tag: object, *parts: object, config: Mapping | None = None) -> str:
    """Return `hato:<namespace>:{<tag>}:<parts…>`: keys with one tag share a Redis Cluster slot (for one script)."""
    return key(f"{{{tag}}}", *parts, config=config)


def queue_name(name: str, config: Mapping | None = None) -> str:
    """Return the RQ queue name for a logical queue (high, default, low)."""
    return f"{namespace(config)}:{name}"


def job_id(name: str, config: Mapping | None = None) -> str:
    """Return an RQ job id unique to this installation (RQ keeps job ids per Redis database)."""
    return f"{namespace(config)}-{name}"
