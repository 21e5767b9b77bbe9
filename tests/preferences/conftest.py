"""Fixtures for the preference tests: the seed article's four types and a signed-in member."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from tests.factories import NotificationTypeFactory, UserFactory


@pytest.fixture(autouse=True)
def push_configured(app, monkeypatch):
    """Web Push configured (VAPID keys), so the screen has its push column (a channel not configured has none)."""
    from app.cli.vapid import generate_keys

    public, private = generate_keys()
    monkeypatch.setitem(app.config, "VAPID_PRIVATE_KEY", private)
    monkeypatch.setitem(app.config, "VAPID_PUBLIC_KEY", public)


@pytest.fixture
def seed_types():
    """The seed's types: approved (in-app, email, push), remind (in-app, push), comment, security (mandatory)."""
    return [
        NotificationTypeFactory(
            type="reservation_approved", label="Reservation approved", default_email=True, default_push=True
        ),
        NotificationTypeFactory(type="reservation_remind", label="Reminder", default_push=True),
        NotificationTypeFactory(type="comment", label="Comment"),
        NotificationTypeFactory(
            type="security",
            label="Security",
            default_email=True,
            mandatory=True,
            description="Sign-ins and password changes.",
        ),
    ]


@pytest.fixture
def member(login_as, seed_types):
    """A signed-in member in Tokyo with no quiet hours."""
    return login_as(UserFactory(timezone="Asia/Tokyo"))


@pytest.fixture
def htmx(csrf):
    """Headers of an htmx request (with a valid CSRF token)."""
    return lambda: {**csrf(), "HX-Request": "true"}


def stored(user_id: int) -> list[tuple]:
    """Return the user's stored preference rows (type, channel, enabled)."""
    return [
        tuple(r)
        for r in db.session.execute(
            sa.text(
                "SELECT type, channel, enabled FROM notification_preferences WHERE user_id = :u ORDER BY type, channel"
            ),
            {"u": user_id},
        )
    ]
