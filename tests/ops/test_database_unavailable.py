"""PostgreSQL unreachable: pages answer the app's own 503 page and the API a 503 problem, both with Retry-After."""

from __future__ import annotations

import logging

import pytest

from app import create_app
from tests.conftest import TEST_CONFIG
from tests.support.waiting import free_port


@pytest.fixture
def no_database():
    """The app pointed at a port where no PostgreSQL listens (Redis is the test one, and up)."""
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing"
    return create_app(dict(TEST_CONFIG, SQLALCHEMY_DATABASE_URI=url)).test_client()


def test_a_signed_in_page_answers_the_503_page_without_asking_for_the_user_again(no_database):
    with no_database.session_transaction() as session:
        session["_user_id"] = "1"  # loading this user is the first statement, and it fails
        session["_fresh"] = True
    response = no_database.get("/inbox", headers={"Accept-Language": "ja"})
    text = response.get_data(as_text=True)
    assert response.status_code == 503
    assert response.mimetype == "text/html"
    assert int(response.headers["Retry-After"]) > 0
    assert '<html lang="ja">' in text and "<h1>503" in text
    assert "Traceback" not in text and "OperationalError" not in text and "127.0.0.1" not in text


def test_the_api_answers_a_503_problem_with_retry_after(no_database):
    response = no_database.post(
        "/v1/notifications",
        json={"type": "comment", "recipient": "u-1", "title": "Hi", "body": "…"},
        headers={"Authorization": "Bearer hato_nothing_here", "Idempotency-Key": "k-1"},
    )
    body = response.get_json()
    assert response.status_code == 503
    assert response.mimetype == "application/problem+json"
    assert int(response.headers["Retry-After"]) > 0
    assert body["status"] == 503 and body["detail"] == "The database is unavailable; retry shortly."


def test_the_sweep_loop_logs_an_outage_in_one_line_and_carries_on(no_database, caplog):
    application = no_database.application
    # Its own app context: the command would otherwise run in the test's, on the test database.
    with application.app_context(), caplog.at_level(logging.INFO, logger="app.cli.sweep"):
        result = application.test_cli_runner().invoke(args=["sweep", "--once"])
    assert result.exit_code == 0, result.output
    warnings = [r for r in caplog.records if r.name == "app.cli.sweep" and r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].exc_info is None  # no traceback per tick while it is down
    assert "database unavailable" in warnings[0].getMessage()
