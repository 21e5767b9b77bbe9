"""Browser-test fixtures shared by several modules: real worker/sweeper processes next to the live server."""

from __future__ import annotations

import os

import pytest

from app.extensions import redis
from tests.support.processes import flask_args, spawn, stop
from tests.support.smtp import RecordingHandler, SmtpSink
from tests.support.waiting import free_port


@pytest.fixture
def processes(live_server, tmp_path):
    """Start `flask worker|sweep` processes against the live server's database and Redis; all stopped afterwards.

    Redis is flushed before and after, so no job or lock from another test reaches them.
    """
    with live_server.app_context():
        redis.client().flushdb()
    started = []

    def start(command: str, **env):
        environment = dict(os.environ, PYTHONUNBUFFERED="1", **{k: str(v) for k, v in env.items()})
        proc = spawn(flask_args(command), environment, tmp_path / f"{command}-{len(started)}.log")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        stop(proc)
    with live_server.app_context():
        redis.client().flushdb()


@pytest.fixture
def sink():
    """A recording SMTP sink on a free port: (port, handler)."""
    port, handler = free_port(), RecordingHandler()
    server = SmtpSink(port, handler).start()
    yield port, handler
    server.stop()


@pytest.fixture
def workers(processes, sink):
    """A worker and a sweeper against the live server's database and the sink."""
    env = dict(SMTP_URL=f"smtp://127.0.0.1:{sink[0]}", EMAIL_PROVIDER="smtp", SWEEP_INTERVAL_SECONDS=0.5)
    for command in ("worker", "sweep"):
        processes(command, **env)


@pytest.fixture
def push_configured(live_server):
    """Web Push configured (VAPID keys) on the live server, so the preference screen has its push column."""
    from app.cli.vapid import generate_keys

    public, private = generate_keys()
    saved = {name: live_server.config[name] for name in ("VAPID_PUBLIC_KEY", "VAPID_PRIVATE_KEY")}
    live_server.config.update(VAPID_PUBLIC_KEY=public, VAPID_PRIVATE_KEY=private)
    yield public
    live_server.config.update(saved)
