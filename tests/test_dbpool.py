"""Pooled connections the server has terminated are replaced on checkout, without a ping query."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from app import dbpool


@pytest.fixture
def engine(app):
    """A small pool of real connections to the test database, with the checkout check installed."""
    engine = sa.create_engine(app.config["SQLALCHEMY_DATABASE_URI"], pool_size=1, max_overflow=0)
    dbpool.install(engine)
    yield engine
    engine.dispose()


def _backend_pid(engine) -> int:
    with engine.connect() as connection:
        return connection.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()


def _terminate(app, pid: int) -> None:
    """Terminate the backend from another connection and wait until it is gone."""
    # Autocommit: pg_stat_activity is a snapshot per transaction, so each poll needs its own.
    killer = sa.create_engine(
        app.config["SQLALCHEMY_DATABASE_URI"], poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT"
    )
    with killer.connect() as connection:
        assert connection.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()
        deadline = time.monotonic() + 10
        while connection.execute(
            sa.text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
        ).scalar_one():
            assert time.monotonic() < deadline, "backend did not exit"
            time.sleep(0.05)
    killer.dispose()


def test_a_healthy_pooled_connection_is_reused(engine):
    assert _backend_pid(engine) == _backend_pid(engine)


def test_a_terminated_connection_is_replaced_without_a_failed_statement(app, engine):
    first = _backend_pid(engine)
    _terminate(app, first)
    queries = []
    sa.event.listen(engine, "before_cursor_execute", lambda *args: queries.append(args[2]))
    second = _backend_pid(engine)  # would raise OperationalError without the checkout check
    assert second != first
    assert queries == ["SELECT pg_backend_pid()"]  # no ping query was spent on it


def test_a_connection_closed_on_the_client_side_is_replaced(engine):
    with engine.connect() as connection:
        first = connection.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        connection.connection.driver_connection.close()
        connection.invalidate()
    assert _backend_pid(engine) != first


def _make_read_only(connection) -> None:
    """What a demoted primary looks like to a connection opened before: every transaction is read-only."""
    connection.execute(sa.text("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"))
    connection.commit()


def test_a_write_refused_as_read_only_is_unavailable_and_the_connection_replaced(engine):
    with engine.connect() as connection:
        first = connection.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        _make_read_only(connection)
        with pytest.raises(dbpool.UNAVAILABLE) as raised:  # the API's 503, the sweeper's "try again"
            connection.execute(sa.text("CREATE TABLE never_written (n int)"))
        assert raised.value.connection_invalidated
        assert dbpool.read_only(raised.value.orig)
    with engine.connect() as connection:  # never the read-only session again: a fresh one that writes
        assert connection.execute(sa.text("SELECT pg_backend_pid()")).scalar_one() != first
        assert connection.execute(sa.text("SHOW transaction_read_only")).scalar_one() == "off"


def test_other_errors_keep_their_class_and_connection(engine):
    with engine.connect() as connection:
        first = connection.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        with pytest.raises(sa.exc.DataError) as raised:
            connection.execute(sa.text("SELECT 1 / 0"))
        assert not raised.value.connection_invalidated
        connection.rollback()
        assert connection.execute(sa.text("SELECT pg_backend_pid()")).scalar_one() == first
