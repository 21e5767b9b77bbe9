"""Statements sent through psycopg on the session's connection: same transaction, SQLAlchemy's errors."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app import driversql
from app.extensions import db
from tests.test_dbpool import _terminate

TXID = driversql.compiled(sa.text("SELECT txid_current(), CAST(:n AS int) + 1"))


def test_runs_in_the_sessions_transaction_and_rolls_back_with_it(db_session):
    db_session.execute(sa.text("CREATE TEMP TABLE scratch (n int)"))
    txid, n = driversql.fetchone(TXID, {"n": 41})
    assert n == 42 and txid == db_session.execute(sa.text("SELECT txid_current()")).scalar_one()
    insert = driversql.compiled(sa.text("INSERT INTO scratch VALUES (:n) RETURNING n"))
    assert driversql.fetchone(insert, {"n": 7}) == (7,)
    assert driversql.fetchone(driversql.compiled(sa.text("UPDATE scratch SET n = 8")), {}) is None
    assert db_session.execute(sa.text("SELECT n FROM scratch")).scalar_one() == 8


def test_a_driver_error_is_sqlalchemys(db_session):
    with pytest.raises(sa.exc.DataError) as raised:
        driversql.fetchone(driversql.compiled(sa.text("SELECT 1 / CAST(:zero AS int)")), {"zero": 0})
    assert not raised.value.connection_invalidated
    db_session.rollback()
    assert driversql.fetchone(TXID, {"n": 1})[1] == 2


def test_fetchall_names_the_columns_and_the_cursor_events_fire(db_session):
    seen: list[tuple[str, str]] = []
    engine = db.engine if isinstance(db.engine, sa.engine.Engine) else db.engine.engine
    listeners = {
        name: lambda conn, cursor, statement, parameters, context, executemany, name=name: seen.append(
            (name, statement)
        )
        for name in ("before_cursor_execute", "after_cursor_execute")
    }
    for name, listener in listeners.items():
        sa.event.listen(engine, name, listener)
    try:
        sql = driversql.compiled(sa.text("SELECT n AS id, n * 2 AS twice FROM generate_series(1, CAST(:k AS int)) n"))
        rows = driversql.fetchall(sql, {"k": 3})
    finally:
        for name, listener in listeners.items():
            sa.event.remove(engine, name, listener)
    assert [(row.id, row.twice) for row in rows] == [(1, 2), (2, 4), (3, 6)]
    # (the test's session may open a savepoint first: SQLAlchemy's own statement, seen too)
    ours = [name for name, statement in seen if statement == sql]
    assert ours == ["before_cursor_execute", "after_cursor_execute"]


@pytest.mark.committed
def test_a_terminated_connection_is_unavailable_and_replaced(app):
    pid = db.session.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
    _terminate(app, pid)
    # OperationalError is what the API answers with 503 (app/dbpool.py UNAVAILABLE); the pool drops the connection.
    with pytest.raises(sa.exc.OperationalError) as raised:
        driversql.fetchone(TXID, {"n": 1})
    assert raised.value.connection_invalidated
    db.session.rollback()
    assert db.session.execute(sa.text("SELECT pg_backend_pid()")).scalar_one() != pid


@pytest.mark.committed
def test_a_write_refused_as_read_only_is_unavailable_and_replaced(app):
    db.session.commit()
    # The transaction's first statement makes it read-only, as a standby's are: on the session's own connection
    # (a pool hands connections out in turn, so a read-only *session* could reach another test), for this
    # transaction only, so nothing outlives the test even if the connection were kept.
    db.session.execute(sa.text("SET TRANSACTION READ ONLY"))
    pid = db.session.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
    write = driversql.compiled(sa.text("SELECT nextval(CAST(:sequence AS regclass))"))
    with pytest.raises(sa.exc.OperationalError) as raised:
        driversql.fetchone(write, {"sequence": "users_id_seq"})
    assert raised.value.connection_invalidated
    db.session.rollback()
    assert db.session.execute(sa.text("SELECT pg_backend_pid()")).scalar_one() != pid
    assert db.session.execute(sa.text("SHOW transaction_read_only")).scalar_one() == "off"


@pytest.mark.committed
def test_a_transactions_connection_is_asked_of_the_session_once_and_forgotten_when_it_ends(app, monkeypatch):
    session = db.session()
    asked: list[int] = []
    connection = session.connection
    monkeypatch.setattr(session, "connection", lambda *args, **kwargs: asked.append(1) or connection(*args, **kwargs))
    first = driversql.fetchone(TXID, {"n": 1})[0]
    assert [driversql.fetchone(TXID, {"n": n})[0] for n in (2, 3)] == [first, first] and len(asked) == 1
    with session.begin_nested():  # a savepoint: the same connection, still kept when it ends
        assert driversql.fetchone(TXID, {"n": 4})[0] == first
    assert driversql.fetchone(TXID, {"n": 5})[0] == first and len(asked) == 1
    session.commit()
    assert driversql.CONNECTION_KEY not in session.info
    second = driversql.fetchone(TXID, {"n": 6})[0]
    assert second != first and len(asked) == 2  # a new transaction, asked anew
    session.rollback()
    assert driversql.CONNECTION_KEY not in session.info
    session.execute(sa.text("SELECT 1"))  # begun by the ORM: its connection is kept for these statements too
    assert driversql.fetchone(TXID, {"n": 7})[0] == session.execute(sa.text("SELECT txid_current()")).scalar_one()
    assert len(asked) == 2
