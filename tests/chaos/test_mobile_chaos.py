"""Chaos (issue 28): kill -9 the worker with phone pushes in flight. Nothing is lost and every device gets each
push at most twice (one duplicate per target at most: the row in flight at the kill goes again whole).

300 members with an iPhone and an Android phone each get one push row; real worker and sweeper processes
send them to the APNs and FCM stand-ins (HTTP/2 and HTTP/1.1 over TLS, in this process), which count what
arrived per token. Bounded: 120 s.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.queueing import enqueue_deliveries
from tests.support import load
from tests.support.apns_server import ApnsServer
from tests.support.fcm_server import FcmServer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.chaos

MEMBERS = 300
DEADLINE_SECONDS = 120

SETUP_SQL = [
    """INSERT INTO notification_types (type, label, default_push, priority)
       VALUES ('chaos-phone', 'Chaos', true, 'default') ON CONFLICT (type) DO NOTHING""",
    """INSERT INTO users (email, display_name, external_id)
       SELECT 'phone-' || g || '@example.com', 'Phone ' || g, 'phone-' || g FROM generate_series(1, :n) g""",
    """INSERT INTO devices (user_id, platform, token)
       SELECT id, 'ios', md5('ios' || id) || md5('ios2' || id) FROM users WHERE external_id LIKE 'phone-%'""",
    """INSERT INTO devices (user_id, platform, token)
       SELECT id, 'android', 'fcm-chaos-' || id FROM users WHERE external_id LIKE 'phone-%'""",
    """INSERT INTO notifications (user_id, type, title, body, dedupe_key)
       SELECT id, 'chaos-phone', 'Hello ' || id, 'A push to two phones', 'phone:' || id
       FROM users WHERE external_id LIKE 'phone-%'""",
]
DELIVERIES_SQL = """INSERT INTO notification_deliveries (notification_id, user_id, channel)
    SELECT id, user_id, 'push' FROM notifications WHERE dedupe_key LIKE 'phone:%' ORDER BY id RETURNING id"""


@pytest.fixture
def phones(stack, tmp_path):
    """The APNs and FCM stand-ins, and the worker environment that sends to them."""
    (tmp_path / "apns").mkdir()
    with ApnsServer(tmp_path / "apns") as apns, FcmServer() as fcm:
        settings = {**apns.settings(), **fcm.settings(fcm.service_account(tmp_path))}
        for name, value in settings.items():
            if name.startswith(("APNS_", "FCM_")):
                stack["env"][name] = str(value)
        # A batch starts no row that could still be sending when its lease ends (lease - margin - the slowest
        # timeout: 3 s here), so the kill's rows come back a few seconds after it and batches still finish.
        stack["env"].update(APNS_TIMEOUT="2", FCM_TIMEOUT="2", PUSH_PROVIDER="webpush", VAPID_PRIVATE_KEY="",
                            DELIVERY_LEASE_SECONDS="10")  # fmt: skip
        yield apns, fcm


def arrivals(apns, fcm) -> Counter:
    return Counter(apns.tokens_received()) + Counter(r.token for r in fcm.received)


def test_kill_9_worker_with_pushes_in_flight_loses_nothing(app, stack, phones, record_property):
    apns, fcm = phones
    with app.app_context():
        for statement in SETUP_SQL:
            db.session.execute(sa.text(statement), {"n": MEMBERS})
        ids = sorted(db.session.execute(sa.text(DELIVERIES_SQL)).scalars())
        tokens = set(db.session.execute(sa.text("SELECT token FROM devices")).scalars())
        db.session.commit()
        assert enqueue_deliveries("default", "push", ids)
    worker = stack["start"]("worker1", "worker")

    wait_for(lambda: sum(arrivals(apns, fcm).values()) >= 150, 60, "the first worker to push 150")
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(5)
    killed_at = sum(arrivals(apns, fcm).values())
    assert killed_at < 2 * MEMBERS, "the worker finished before it could be killed"

    stack["start"]("worker2", "worker")
    stack["start"]("sweeper", "sweep")
    with app.app_context():
        wait_for(lambda: load.status_counts().get("sent", 0) == MEMBERS, DEADLINE_SECONDS, "every row to be sent")

    arrived = arrivals(apns, fcm)
    duplicates = sum(n - 1 for n in arrived.values())
    summary = f"mobile kill -9 after {killed_at} pushes: devices={len(arrived)} duplicates={duplicates}"
    print(summary)
    record_property("chaos", summary)
    assert set(arrived) == tokens  # none lost, nothing foreign
    assert max(arrived.values()) <= 2  # at most one duplicate per device
    assert duplicates <= 2  # the one row in flight at the kill: its iPhone and its Android phone
