"""A small ledger for the analytics tests: twelve deliveries over three hours, and ways to move them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from app.extensions import db
from tests.factories import NotificationFactory, NotificationTypeFactory, UserFactory

HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=6)
SQL = sa.text


def make_ledger() -> list[int]:
    """Twelve deliveries over three hours, two types, a tenant, e-mail and SMS, all pending."""
    db.session.execute(SQL("INSERT INTO tenants (key, name) VALUES ('acme', 'Acme')"))
    tenant = db.session.execute(SQL("SELECT id FROM tenants WHERE key = 'acme'")).scalar_one()
    NotificationTypeFactory(type="comment")
    NotificationTypeFactory(type="invoice")
    user = UserFactory()
    ids = []
    for i in range(12):
        n = NotificationFactory(user_id=user.id, type="comment" if i % 3 else "invoice",
                                tenant_id=tenant if i % 4 == 0 else None)  # fmt: skip
        ids.append(
            db.session.execute(
                SQL(
                    "INSERT INTO notification_deliveries (notification_id, user_id, channel, created_at) "
                    "VALUES (:n, :u, :c, :at) RETURNING id"
                ),
                {
                    "n": n.id,
                    "u": user.id,
                    "c": "sms" if i % 5 == 4 else "email",
                    "at": HOUR + timedelta(minutes=17 * i),
                },
            ).scalar_one()
        )
    return ids


def update(ids, **values) -> None:
    sets = ", ".join(f"{k} = {v}" for k, v in values.items())
    db.session.execute(SQL(f"UPDATE notification_deliveries SET {sets} WHERE id = ANY(:ids)"), {"ids": list(ids)})


def event(delivery_id: int, kind: str, name: str) -> None:
    db.session.execute(
        SQL(
            "INSERT INTO provider_events (delivery_id, user_id, provider, provider_event_id, event, occurred_at) "
            "SELECT id, user_id, 'smtp', :name, :kind, now() FROM notification_deliveries WHERE id = :id"
        ),
        {"id": delivery_id, "kind": kind, "name": name},
    )
