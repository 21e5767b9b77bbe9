"""Statements sent straight through psycopg on the session's own connection, in its transaction.

For the few statements of a hot path (the API ingest's idempotency record and its notify statement) whose
results are plain values. SQLAlchemy's execute costs more Python than the round trip's own work (ORM
session bookkeeping, result metadata, row objects); here the text is compiled once, at import, exactly as
SQLAlchemy would send it, and runs in the unit of work's transaction (its own connection inside
app/unitofwork.py on_connection(), else the session's), so it commits or rolls back with everything else
the request wrote. A psycopg error comes back as SQLAlchemy's (OperationalError and
the rest), so the 503 handling and the pool's invalidation of a dead connection work as before, and
SQLAlchemy's cursor events fire for these statements too (when anything listens).

The transaction's connection is kept on the session while the transaction lasts (init_app's listeners), so the
statements after its first find it without asking the session again (about 20 µs of its bookkeeping each).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.rows import namedtuple_row
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from app import dbpool, extensions
from app.extensions import db

_DIALECT = psycopg_dialect.dialect()
CONNECTION_KEY = "hato.driversql.connection"  # session.info: the open transaction's connection


def compiled(statement: sa.TextClause) -> str:
    """Return statement's text as SQLAlchemy sends it through psycopg (%(name)s parameters)."""
    return str(statement.compile(dialect=_DIALECT))


def fetchone(sql: str, params: dict[str, Any]) -> tuple | None:
    """Run compiled sql on the session's connection (beginning its transaction if none); return its first row.

    Unlike session.execute it does not flush the ORM's pending objects first: for statements on rows the
    ORM does not hold.
    """
    return _run(sql, params, lambda cursor: cursor.fetchone())


def fetchall(sql: str, params: dict[str, Any]) -> list:
    """Run compiled sql as fetchone does; return every row as a named tuple (row.id, row.kind …)."""
    return _run(sql, params, lambda cursor: cursor.fetchall(), namedtuple_row)


def _connection() -> sa.Connection:
    """The unit of work's own connection (app/unitofwork.py on_connection()), else the session's, in its open
    transaction, beginning one if none is open."""
    unit_connection = extensions.unit_connection.get()
    if unit_connection is not None:
        return unit_connection()
    session = db.session()
    connection = session.info.get(CONNECTION_KEY)
    if connection is None or connection.closed:
        connection = session.connection()  # begins the transaction: _begun() keeps its connection
    return connection


def _begun(session, transaction, connection) -> None:
    session.info[CONNECTION_KEY] = connection


def _ended(session, transaction) -> None:
    if transaction.parent is None:  # the root transaction (a savepoint's end keeps the connection)
        session.info.pop(CONNECTION_KEY, None)


def init_app(app) -> None:
    """Keep each transaction's connection on its session while it lasts (once per process: session class events)."""
    for name, listener in (("after_begin", _begun), ("after_transaction_end", _ended)):
        if not sa.event.contains(db.session, name, listener):
            sa.event.listen(db.session, name, listener)


def _run(sql: str, params: dict[str, Any], take: Callable, row_factory=None):
    connection = _connection()
    driver = connection.connection.driver_connection
    try:
        with driver.cursor(row_factory=row_factory) if row_factory else driver.cursor() as cursor:
            _execute(connection, cursor, sql, params)
            # rownumber, not description: that builds a Column object per column to say the same (rows or none).
            return take(cursor) if cursor.rownumber is not None else None
    except psycopg.Error as exc:
        # What SQLAlchemy's own execute does with a driver error: a dead connection is invalidated (the
        # pool replaces it), and the error is raised as SQLAlchemy's class for it.
        read_only = dbpool.read_only(exc)  # a demoted primary: never write here again (app/dbpool.py)
        invalidated = read_only or connection.dialect.is_disconnect(exc, driver, None)
        if invalidated:
            connection.invalidate(exc)
        if read_only:
            raise dbpool.unavailable_error(sql, params, exc) from exc
        raise sa.exc.DBAPIError.instance(
            sql, params, exc, psycopg.Error, connection_invalidated=invalidated, dialect=connection.dialect
        ) from exc


def _execute(connection: sa.Connection, cursor, sql: str, params: dict[str, Any]) -> None:
    # SQLAlchemy's cursor events fire as for its own statements (there is no execution context: None), so
    # whatever listens (statement counts in tests, tracing) still sees these; the check is the one
    # Connection._execute_context makes, and costs nothing when nobody listens.
    if not (connection._has_events or connection.engine._has_events):
        cursor.execute(sql, params)
        return
    for listener in connection.dispatch.before_cursor_execute:
        sql, params = listener(connection, cursor, sql, params, None, False)
    cursor.execute(sql, params)
    connection.dispatch.after_cursor_execute(connection, cursor, sql, params, None, False)
