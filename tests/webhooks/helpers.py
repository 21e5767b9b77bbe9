"""Registering an endpoint at a test receiver and running the webhook engine until nothing is due."""

from __future__ import annotations

import sqlalchemy as sa
from flask import current_app

from app.delivery import engine
from app.extensions import db
from app.unitofwork import commit
from app.webhooks import service
from app.webhooks.events import EVENT_TYPES


def register(receiver, types=EVENT_TYPES, url: str | None = None) -> int:
    """An enabled endpoint at receiver for types; the receiver learns its secret. Returns its id."""
    created = service.create_endpoint(None, url or receiver.url, types)
    commit()
    receiver.secret = created.secret
    return created.id


def rows(where: str = "true", **params) -> list:
    db.session.rollback()
    return db.session.execute(
        sa.text(f"SELECT * FROM webhook_deliveries WHERE {where} ORDER BY id"), params
    ).all()  # fmt: skip


def drain(rounds: int = 10, *, force_due: bool = True) -> list[dict]:
    """Run deliver_batch over every pending row (retries made due at once when force_due); return the counts."""
    results = []
    for _ in range(rounds):
        if force_due:
            db.session.execute(
                sa.text("UPDATE webhook_deliveries SET next_attempt_at = now() WHERE status = 'pending'")
            )
            commit()
        ids = [r.id for r in rows("status = 'pending' AND next_attempt_at <= now()")]
        if not ids:
            break
        results.append(engine.deliver_batch("webhook", ids, current_app.config))
    return results
