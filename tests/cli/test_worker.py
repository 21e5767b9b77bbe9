"""A real RQ round trip: enqueue like the API does, run a SimpleWorker in burst mode, mail arrives."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from rq.serializers import JSONSerializer

from app.cli.worker import AppSimpleWorker
from app.extensions import db, redis
from app.queueing import enqueue_deliveries, get_queue
from tests.factories import NotificationTypeFactory


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_simple_worker_burst_round_trip(app, smtp_sink, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "DELIVERY_BATCH_SIZE", 3)
    urgent = NotificationTypeFactory(type="otp", default_email=True, priority="high")
    ids = [make_delivery().id for _ in range(5)]
    otp_id = make_delivery(type_=urgent).id
    assert enqueue_deliveries("default", "email", ids)
    assert enqueue_deliveries("high", "email", [otp_id])
    assert len(get_queue("default")) == 2

    connection = redis.client()
    worker = AppSimpleWorker(
        [get_queue(n, connection) for n in ("high", "default", "low")], connection=connection, serializer=JSONSerializer
    )
    assert worker.work(burst=True, with_scheduler=True) is True

    assert len(smtp_sink.messages) == 6
    # high is drained before default: the OTP went out first.
    assert smtp_sink.messages[0].message["Message-ID"] == f"<delivery-{otp_id}@hato.127.0.0.1>"
    statuses = (
        db.session.execute(
            sa.text("SELECT DISTINCT status FROM notification_deliveries WHERE id = ANY(:ids)"), {"ids": ids + [otp_id]}
        )
        .scalars()
        .all()
    )
    assert statuses == ["sent"]
    assert len(get_queue("default")) == 0 and get_queue("default").failed_job_registry.count == 0


def test_worker_command_rejects_unknown_queues(app):
    result = app.test_cli_runner().invoke(args=["worker", "--burst", "nope"])

    assert result.exit_code != 0 and "unknown queue" in result.output


@pytest.mark.committed
@pytest.mark.parametrize("mode", ["--fork", "--simple"])
def test_worker_command_round_trip(app, mode, tmp_path):
    """`flask worker --burst` in a real process: forked work horses open their own DB connections."""
    import os
    import subprocess
    import sys

    from tests.support import load, processes
    from tests.support.waiting import free_port

    port = free_port()
    log = tmp_path / "sink.log"
    sink = processes.start_sink(port, log, tmp_path / "sink.out")
    try:
        with app.app_context():
            ids = load.create_email_deliveries(30, prefix=f"cli{mode}")
            assert enqueue_deliveries("default", "email", ids)
        env = dict(os.environ, SMTP_URL=f"smtp://127.0.0.1:{port}", EMAIL_PROVIDER="smtp", DELIVERY_BATCH_SIZE="10")
        done = subprocess.run(
            [sys.executable, *processes.flask_args("worker", "--burst", mode)],
            cwd=processes.ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        with app.app_context():
            assert load.status_counts() == {"sent": 30}
        assert sorted(processes.message_ids(log)) == sorted(f"<delivery-{i}@hato.127.0.0.1>" for i in ids)
    finally:
        processes.stop(sink)
