"""A pooled connection's liveness, checked without a round trip to PostgreSQL.

SQLAlchemy's pre-ping sends a query on every checkout: about a millisecond per API request. A
connection resting in the pool has nothing to say, so when its socket is readable the server has
spoken first: it was terminated (a restart, pg_terminate_backend, an idle timeout) and sent its
last error, or closed the socket. Such a connection is discarded and the pool hands out a fresh
one, so a database restart costs no failed request. What this cannot see (a peer that vanished
without a word) is bounded by TCP keepalives and the statement that then fails with a 503.

After a failover (DATABASE_URL listing several hosts with target_session_attrs=read-write) the next
connection goes to whichever host accepts writes. A connection still open to a server that has become
read-only (a demoted primary, a standby reached without that attribute) answers a write with SQLSTATE
25006: that is taken as a disconnect too, so the statement fails with a 503 and the whole pool is
replaced, never retried on the read-only server.
"""

from __future__ import annotations

import select

import sqlalchemy as sa
from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

# What PostgreSQL being away looks like through SQLAlchemy: a refused or dropped connection (OperationalError;
# InterfaceError on one already closed) or no pooled connection free in time (TimeoutError). Pages and the
# API answer these with 503 (app/web/errors.py); the sweeper logs them in one line and tries again.
UNAVAILABLE = (OperationalError, InterfaceError, PoolTimeoutError)


# read_only_sql_transaction: this server takes no writes (any more).
READ_ONLY_SQLSTATE = "25006"


def read_only(exc: BaseException) -> bool:
    """True if a driver error says the server is read-only (a standby, or a primary demoted since connect)."""
    return getattr(exc, "sqlstate", None) == READ_ONLY_SQLSTATE


def unavailable_error(statement, params, exc: BaseException) -> OperationalError:
    """The SQLAlchemy error a read-only server's refusal is raised as: one UNAVAILABLE (503, retried later)."""
    return OperationalError(statement, params, exc, connection_invalidated=True)


def on_error(context) -> Exception | None:
    """handle_error hook: a write refused as read-only invalidates the connection (and so the pool's older ones)."""
    if not read_only(context.original_exception):
        return None
    context.is_disconnect = True
    return unavailable_error(context.statement, context.parameters, context.original_exception)


def _server_has_spoken(dbapi_connection) -> bool:
    """True if the idle connection is closed, broken, or has unread data from the server."""
    if getattr(dbapi_connection, "closed", False) or getattr(dbapi_connection, "broken", False):
        return True
    # poll, not select: select() refuses descriptors above 1023, which a web process holding a thousand
    # websockets hands to every new connection, and each was then taken for dead (seen in bench_realtime).
    # gevent's monkey-patching removes select.poll; its select() has no such limit.
    try:
        if not hasattr(select, "poll"):
            return bool(select.select([dbapi_connection.fileno()], [], [], 0)[0])
        poller = select.poll()
        poller.register(dbapi_connection.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


def check_on_checkout(dbapi_connection, connection_record, connection_proxy) -> None:
    """Pool checkout hook: refuse a connection the server has already closed or terminated."""
    if _server_has_spoken(dbapi_connection):
        # The pool closes this one and retries the checkout with a new connection.
        raise DisconnectionError("the server closed this pooled connection")


def install(engine: sa.Engine) -> None:
    """Check every checkout from engine's pool, and treat read-only refusals as disconnects (idempotent)."""
    if not sa.event.contains(engine, "checkout", check_on_checkout):
        sa.event.listen(engine, "checkout", check_on_checkout)
    if not sa.event.contains(engine, "handle_error", on_error):
        sa.event.listen(engine, "handle_error", on_error, retval=True)
