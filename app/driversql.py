"""Statements sent straight through psycopg on the session's own connection, in its transaction.

For the few statements of a hot path (the API ingest's idempotency record) whose result is one row of
plain values. SQLAlchemy's execute costs more Python than the round trip's own work (ORM session
bookkeeping, result metadata, row objects); here the text is compiled once, at import, exactly as
SQLAlchemy would send it, and runs on the session's connection, so it commits or rolls back with
everything else the request wrote. A psycopg error comes back as SQLAlchemy's (OperationalError and
the rest), so the 503 handling and the pool's invalidation of a dead connection work as before.
"""

from __future__ import annotations

from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from app.extensions import db

_DIALECT = psycopg_dialect.dialect()


def compiled(statement: sa.TextClause) -> str:
    """Return statement's text as SQLAlchemy sends it through psycopg (%(name)s parameters)."""
    return str(statement.compile(dialect=_DIALECT))


def fetchone(sql: str, params: dict[str, Any]) -> tuple | None:
    """Run compiled sql on the session's connection (beginning its transaction if none); return its first row.

    Unlike session.execute it does not flush the ORM's pending objects first: for statements on rows the
    ORM does not hold.
    """
    connection = db.session.connection()
    driver = connection.connection.driver_connection
    try:
        with driver.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone() if cursor.description is not None else None
    except psycopg.Error as exc:
        # What SQLAlchemy's own execute does with a driver error: a dead connection is invalidated (the
        # pool replaces it), and the error is raised as SQLAlchemy's class for it.
        invalidated = connection.dialect.is_disconnect(exc, driver, None)
        if invalidated:
            connection.invalidate(exc)
        raise sa.exc.DBAPIError.instance(
            sql, params, exc, psycopg.Error, connection_invalidated=invalidated, dialect=connection.dialect
        ) from exc
