"""Attack: read /healthz while a dependency is down to learn database hosts, users and addresses."""

from __future__ import annotations

import logging

from app import create_app
from tests.conftest import TEST_CONFIG
from tests.support.waiting import free_port

SECRET_HOST_USER = "hato_owner_secretuser"


def _leaky_app(**overrides):
    return create_app(dict(TEST_CONFIG, **overrides))


def test_postgres_failure_shows_no_host_user_or_exception_text(caplog):
    port = free_port()
    url = f"postgresql+psycopg://{SECRET_HOST_USER}:pw@127.0.0.1:{port}/payroll_db"
    with caplog.at_level(logging.WARNING, logger="app.ops.health"):
        response = _leaky_app(SQLALCHEMY_DATABASE_URI=url).test_client().get("/healthz")
    text = response.get_data(as_text=True)
    assert response.status_code == 503
    assert response.get_json()["checks"]["postgres"] == {"ok": False, "status": "failing"}
    for leaked in (SECRET_HOST_USER, "payroll_db", str(port), "127.0.0.1", "OperationalError", "connection"):
        assert leaked not in text, leaked
    # The operator still learns why, from the log.
    assert any("OperationalError" in r.getMessage() and "postgres" in r.getMessage() for r in caplog.records)


def test_redis_failure_shows_no_address_or_exception_text(caplog):
    port = free_port()
    with caplog.at_level(logging.WARNING, logger="app.ops.health"):
        response = _leaky_app(REDIS_URL=f"redis://:hunter2@127.0.0.1:{port}/15").test_client().get("/healthz")
    text = response.get_data(as_text=True)
    assert response.status_code == 503
    assert response.get_json()["failing"] == ["redis"]
    for leaked in ("hunter2", str(port), "127.0.0.1", "ConnectionError", "Error"):
        assert leaked not in text, leaked
    assert any("redis" in r.getMessage() for r in caplog.records)


def test_a_healthy_answer_holds_only_status_and_latency(client):
    body = client.get("/healthz").get_json()
    assert body["status"] == "ok"
    for check in body["checks"].values():
        assert set(check) == {"ok", "status", "latency_ms"}
