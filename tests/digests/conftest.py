"""Fixtures for the digest tests: e-mail waiting for a digest, built like the engine leaves it."""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlalchemy as sa

from app.extensions import db
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory


@pytest.fixture
def hourly_type():
    """A type whose e-mail goes in the hourly digest by default."""
    return NotificationTypeFactory(type="like", label="Likes", default_email=True, email_frequency="hourly")


@pytest.fixture
def daily_type():
    """A type whose e-mail goes in the daily digest by default."""
    return NotificationTypeFactory(type="follow", label="New followers", default_email=True, email_frequency="daily")


@pytest.fixture
def waiting():
    """Make a notification created at `at` whose e-mail waits for a digest (skipped, reason 'digested')."""

    def _make(user, type_, at: datetime, title="Alice liked your post", link_path="/inbox", read=False):
        notification = NotificationFactory(user_id=user.id, type=type_.type, title=title, link_path=link_path)
        db.session.execute(
            sa.text(
                "UPDATE notifications SET created_at = :at, read_at = CASE WHEN :read THEN now() END WHERE id = :id"
            ),
            {"at": at, "read": read, "id": notification.id},
        )
        delivery = DeliveryFactory(notification_id=notification.id, status="skipped", skip_reason="digested")
        db.session.flush()
        return delivery

    return _make


def runs() -> list[tuple]:
    """Every digest run as (user_id, kind, period_start, status, item_count), in id order."""
    db.session.expire_all()
    return [
        tuple(row)
        for row in db.session.execute(
            sa.text("SELECT user_id, kind, period_start, status, item_count FROM digest_runs ORDER BY id")
        )
    ]
