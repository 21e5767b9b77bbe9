"""Fixtures for the console tests: people in each role, signed in, and a way to read the audit log."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import AuditEntry
from tests.factories import UserFactory


@pytest.fixture
def operator(login_as):
    """An operator, signed in on the test client."""
    return login_as(UserFactory(role="operator", email="olivia@example.com", timezone="Asia/Tokyo"))


@pytest.fixture
def admin(login_as):
    """An admin, signed in on the test client."""
    return login_as(UserFactory(role="admin", email="adam@example.com"))


@pytest.fixture
def member(login_as):
    """A member, signed in on the test client."""
    return login_as(UserFactory(role="member"))


@pytest.fixture
def audit_rows():
    """Return the audit entries (oldest first), optionally only one action."""

    def _rows(action: str | None = None) -> list[AuditEntry]:
        stmt = sa.select(AuditEntry).order_by(AuditEntry.id)
        if action:
            stmt = stmt.where(AuditEntry.action == action)
        return list(db.session.scalars(stmt))

    return _rows


@pytest.fixture
def broadcasts(monkeypatch):
    """Record publish_broadcast() calls made by the console views (after their commit)."""
    calls: list[bool] = []

    def fake() -> bool:
        calls.append(True)
        return True

    monkeypatch.setattr("app.live.publish.publish_broadcast", fake)
    return calls
