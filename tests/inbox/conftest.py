"""Fixtures for the inbox tests: a signed-in member, htmx headers, and a record of badge publishes."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from tests.factories import NotificationTypeFactory, UserFactory


@pytest.fixture
def member(login_as):
    """A signed-in member with the `comment` type present."""
    NotificationTypeFactory(type="comment")
    return login_as(UserFactory(timezone="Asia/Tokyo"))


@pytest.fixture
def htmx(csrf):
    """Headers of an htmx request (with a valid CSRF token)."""
    return lambda: {**csrf(), "HX-Request": "true"}


@pytest.fixture
def published(monkeypatch):
    """The user-id lists the inbox views' badge events were routed for."""
    calls: list[list[int]] = []
    monkeypatch.setattr("app.live.publish.route_badge", lambda ids, *rest: calls.append(sorted(ids)) or set(ids))
    return calls


def state(notification_id: int):
    """Return (read_at, archived_at) of one notification as stored."""
    return db.session.execute(
        sa.text("SELECT read_at, archived_at FROM notifications WHERE id = :id"), {"id": notification_id}
    ).one()
