"""Ledger rows for the delivery engine, built with factories, and the in-memory fake provider."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.providers.fake import FAKE
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory


@pytest.fixture
def fake_provider(app, monkeypatch):
    """Route e-mail through the in-memory fake provider for this test."""
    monkeypatch.setitem(app.config, "EMAIL_PROVIDER", "fake")
    yield FAKE.reset()
    FAKE.reset()


@pytest.fixture
def email_type():
    """A notification type whose e-mail channel is on by default."""
    return NotificationTypeFactory(type="comment", label="Comments", default_email=True, default_push=True)


@pytest.fixture
def make_delivery(email_type):
    """Build user → notification → pending delivery; keyword args override each part."""

    def _make(user=None, type_=None, channel="email", title="Hello", body="Body text", data=None, **fields):
        user = user or UserFactory()
        notification = NotificationFactory(
            user_id=user.id, type=(type_ or email_type).type, title=title, body=body, data=data or {}
        )
        delivery = DeliveryFactory(notification_id=notification.id, channel=channel, **fields)
        db.session.flush()
        return delivery

    return _make


def reload(delivery):
    """Return the delivery as the database has it now."""
    db.session.expire_all()
    return db.session.get(type(delivery), sa.inspect(delivery).identity)  # (id, user_id) since 0016
