"""An idempotent API call is one unit of work on one connection of its own (app/unitofwork.py on_connection())."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from app.extensions import db
from tests.factories import NotificationTypeFactory, UserFactory

pytestmark = pytest.mark.committed  # the pool's own connections, not the test's rolled-back one


@pytest.fixture
def statements():
    """(backend pid, statement) of every statement sent while the test runs."""
    sent = []

    def record(conn, cursor, statement, parameters, context, executemany):
        sent.append((conn.connection.driver_connection.info.backend_pid, statement))

    sa.event.listen(db.engine, "before_cursor_execute", record)
    yield sent
    sa.event.remove(db.engine, "before_cursor_execute", record)


@pytest.fixture
def ready(api):
    NotificationTypeFactory(type="order_shipped", default_email=True)
    UserFactory(external_id="u1")
    db.session.commit()
    db.session.remove()
    api.post("/v1/ping")  # the key's lookup is cached from here on (a session read before the unit would keep it)
    db.session.remove()
    return api


def test_the_claim_the_notification_and_the_answer_share_one_backend_given_back_after(ready, statements):
    answer = ready.post(
        "/v1/notifications",
        json={"type": "order_shipped", "recipient": "u1", "title": "Shipped"},
        idempotency_key=str(uuid.uuid4()),
    )
    assert answer.status_code == 202, answer.json
    assert len(statements) >= 3 and len({pid for pid, _ in statements}) == 1
    assert db.engine.pool.checkedout() == 0
    count = db.session.execute(sa.text("SELECT count(*) FROM notifications")).scalar()
    assert count == 1


def test_a_view_that_uses_the_session_joins_the_same_transaction(ready, statements):
    """PUT /v1/users goes through the ORM: its statements run on the claim's backend, and a replay answers alike."""
    key = str(uuid.uuid4())
    first = ready.put("/v1/users/u2", json={"email": "u2@example.com"}, idempotency_key=key)
    assert first.status_code in (200, 201), first.json
    assert len({pid for pid, _ in statements}) == 1
    replay = ready.put("/v1/users/u2", json={"email": "u2@example.com"}, idempotency_key=key)
    assert replay.headers.get("Idempotent-Replayed") == "true" and replay.json == first.json
    assert db.engine.pool.checkedout() == 0


def test_a_refused_call_writes_nothing_and_frees_its_key(ready):
    key = str(uuid.uuid4())
    refused = ready.post(
        "/v1/notifications", json={"type": "order_shipped", "recipient": "nobody", "title": "x"}, idempotency_key=key
    )
    assert refused.status_code == 422
    assert db.session.execute(sa.text("SELECT count(*) FROM idempotency_keys")).scalar() == 0
    db.session.remove()
    again = ready.post(
        "/v1/notifications", json={"type": "order_shipped", "recipient": "u1", "title": "x"}, idempotency_key=key
    )
    assert again.status_code == 202
    assert db.engine.pool.checkedout() == 0
