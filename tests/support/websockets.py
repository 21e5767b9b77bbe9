"""Fixtures for websocket tests that need real web processes (a pytest plugin, see tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.realtime.helpers import Gunicorn
from tests.support.waiting import free_port


@pytest.fixture(scope="module")
def two_processes(app, tmp_path_factory):
    """Real gunicorn web processes A and B (gthread, one worker each) on the test database and Redis."""
    logs = tmp_path_factory.mktemp("gunicorn")
    first = Gunicorn(free_port(), log_path=logs / "a.log").start()
    second = Gunicorn(free_port(), log_path=logs / "b.log")
    try:
        second.start()
        yield first, second
    finally:
        first.stop()
        second.stop()
