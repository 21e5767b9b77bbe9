"""Shared by the chaos tests: a recording SMTP sink plus worker/sweeper processes."""

from __future__ import annotations

import os

import pytest

from app.extensions import redis
from tests.support import processes
from tests.support.waiting import free_port


@pytest.fixture
def stack(app, tmp_path):
    """Sink + environment for worker/sweeper processes; everything started is stopped afterwards."""
    port = free_port()
    log = tmp_path / "sink.log"
    procs = {"sink": processes.start_sink(port, log, tmp_path / "sink.out")}
    env = dict(
        os.environ,
        SMTP_URL=f"smtp://127.0.0.1:{port}",
        EMAIL_PROVIDER="smtp",
        DELIVERY_BATCH_SIZE="100",
        DELIVERY_LEASE_SECONDS="8",
        SMTP_TIMEOUT="2",  # one send fits in what the short lease leaves (app/config.py refuses otherwise)
        SWEEP_INTERVAL_SECONDS="1",
        SWEEP_REQUEUE_AFTER_SECONDS="3",
        PYTHONUNBUFFERED="1",
    )
    with app.app_context():
        redis.client().flushdb()

    def start(name: str, *command: str):
        procs[name] = processes.spawn(processes.flask_args(*command), env, tmp_path / f"{name}.log")
        return procs[name]

    yield {"start": start, "log": log, "procs": procs, "tmp": tmp_path, "env": env}
    processes.stop_all(procs.values())
    with app.app_context():
        redis.client().flushdb()
