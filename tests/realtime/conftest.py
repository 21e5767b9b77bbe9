"""Fixtures for the realtime tests: committed users on the live server, their session cookies."""

from __future__ import annotations

import pytest

from app.extensions import db
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
