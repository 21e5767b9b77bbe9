"""DELIVERY_MAX_AGE: deliveries held back by an open breaker or an empty bucket too long go to the DLQ as expired."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.delivery import service
from app.delivery.dlq import replay_one
from app.delivery.ledger_queries import DlqFilters, dlq_facets, dlq_page
from app.extensions import db
from app.models import DeliveryAttempt
from app.sweeper import sweep_once
from jobs.delivery import deliver_batch
from tests.providers.test_routing import open_breaker
from tests.support.delivery import reload


def set_row(delivery, sql: str):
    db.session.execute(sa.text(f"UPDATE notification_deliveries SET {sql} WHERE id = :id"), {"id": delivery.id})


def outcomes(delivery) -> list[str]:
    return list(
        db.session.execute(
            sa.select(DeliveryAttempt.outcome)
            .where(DeliveryAttempt.delivery_id == delivery.id)
            .order_by(DeliveryAttempt.id)
        ).scalars()
    )


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_a_row_held_by_an_open_breaker_remembers_since_when_and_a_send_forgets(app, fake_provider, make_delivery):
    delivery = make_delivery()
    open_breaker(app, "fake")

    assert deliver_batch("email", [delivery.id])["waiting"] == 1
    held = reload(delivery)
    assert (held.status, held.attempts) == ("pending", 0)
    first_held = held.held_since
    assert first_held is not None

    set_row(delivery, "next_attempt_at = now()")
    db.session.commit()
    deliver_batch("email", [delivery.id])  # held again: the holding began at the first time
    assert reload(delivery).held_since == first_held

    from app.extensions import redis

    redis.client().flushdb()  # the breaker closes
    set_row(delivery, "next_attempt_at = now()")
    db.session.commit()
    assert deliver_batch("email", [delivery.id])["sent"] == 1
    assert reload(delivery).held_since is None


def test_the_sweeper_expires_rows_held_longer_than_the_max_age(app, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "DELIVERY_MAX_AGE", 3600)
    old = make_delivery(attempts=2, provider="smtp")
    set_row(old, "held_since = now() - interval '2 hours', next_attempt_at = now() + interval '1 minute'")
    recent = make_delivery()
    set_row(recent, "held_since = now() - interval '10 minutes', next_attempt_at = now() + interval '1 minute'")
    waiting = make_delivery()  # an ordinary retry (or an escalation) that was never held back
    set_row(waiting, "created_at = now() - interval '3 days', next_attempt_at = now() + interval '1 hour'")

    assert sweep_once()["expired"] == 1

    row = reload(old)
    assert (row.status, row.error_kind, row.attempts) == ("failed", "expired", 2)
    assert "longer than DELIVERY_MAX_AGE" in row.last_error
    assert outcomes(old) == ["expired"]
    assert reload(recent).status == "pending"
    assert reload(waiting).status == "pending"
    assert sweep_once()["expired"] == 0  # idempotent: the row is no longer pending


def test_expiry_is_bounded_per_statement(app, make_delivery):
    rows = [make_delivery() for _ in range(3)]
    for row in rows:
        set_row(row, "held_since = now() - interval '3 days'")

    assert service.expire_held(3600, 2) == 2
    assert service.expire_held(3600, 2) == 1
    assert service.expire_held(3600, 2) == 0


def test_expired_rows_are_in_the_dlq_like_any_other_and_replay_starts_afresh(app, make_delivery, client, login_as):
    from tests.factories import UserFactory

    delivery = make_delivery(provider="smtp")
    set_row(delivery, "held_since = now() - interval '3 days'")
    service.expire_held(3600, 10)

    assert [row["id"] for row in dlq_page(DlqFilters(error_kind="expired")).rows] == [delivery.id]
    assert ("expired", 1) in dlq_facets()["error_kind"]
    login_as(UserFactory(role="operator"))
    page = client.get("/console/dlq?error_kind=expired").get_data(as_text=True)
    assert "expired" in page and f"/console/deliveries/{delivery.id}" in page
    detail = client.get(f"/console/deliveries/{delivery.id}").get_data(as_text=True)
    assert "tag--failed" in detail and "longer than DELIVERY_MAX_AGE" in detail

    replay_one(None, delivery.id)
    row = reload(delivery)
    assert (row.status, row.held_since, row.error_kind) == ("pending", None, None)
