"""Fixtures for the realtime tests: committed users on the live server, their session cookies."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.realtime.hub import Hub
from tests.factories import UserFactory
from tests.realtime.helpers import session_cookie


@pytest.fixture
def make_user(live_server):
    """Create and commit a user in the live server's database; return (user_id, session cookie)."""

    def _make(**fields) -> tuple[int, str]:
        with live_server.app_context():
            user = UserFactory(**fields)
            db.session.commit()
            user_id = user.id
            db.session.remove()
        return user_id, session_cookie(live_server, user_id)

    return _make


@pytest.fixture
def hub(app):
    """A hub of its own on the test app (real Redis listener), shut down afterwards."""
    hub = Hub(app)
    yield hub
    hub.shutdown(timeout=1)
