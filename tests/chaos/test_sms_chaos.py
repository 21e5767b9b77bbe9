"""Chaos (issue 29): kill -9 the worker three times with SMS in flight. Nothing is lost and there is at most one
duplicate per kill (the one message past the fence's point, sent but not yet recorded, goes again).

2,000 members, each with a verified number and consent, get one SMS row whose text names its notification;
real worker and sweeper processes send them to the Twilio stand-in (the Messages API, in this process), which
lists every accepted send and every refusal. A delivery is identified by (To, Body): one number per member, one
body per notification. Each kill lands mid-batch; a fresh worker takes over and the sweeper returns the killed
batch's rows when their lease ends. Bounded: 60 s after the last kill.
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
from tests.support.twilio_server import TwilioServer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.chaos

MEMBERS = 2000
KILL_AT = (300, 800, 1300)  # SMS accepted by the stand-in when each worker is killed
DEADLINE_SECONDS = 60

SETUP_SQL = [
    """INSERT INTO notification_types (type, label, priority, default_channels)
       VALUES ('chaos-sms', 'Chaos SMS', 'default', '{sms}') ON CONFLICT (type) DO NOTHING""",
    """INSERT INTO users (email, display_name, external_id, phone, phone_verified_at, sms_opt_in, sms_opt_in_at,
                          sms_consent_source)
       SELECT 'sms-' || g || '@example.com', 'SMS ' || g, 'sms-' || g, '+8190' || lpad(g::text, 8, '0'), now(),
              true, now(), 'api'
       FROM generate_series(1, :n) g""",
    """INSERT INTO notifications (user_id, type, title, body, dedupe_key)
       SELECT id, 'chaos-sms', 'Code ' || id, 'Your sign-in code for delivery check ' || id, 'sms:' || id
       FROM users WHERE external_id LIKE 'sms-%'""",
]
DELIVERIES_SQL = """INSERT INTO notification_deliveries (notification_id, user_id, channel)
    SELECT id, user_id, 'sms' FROM notifications WHERE dedupe_key LIKE 'sms:%' ORDER BY id RETURNING id"""
# What the stand-in must receive: one (To, Body) per row, the body as the SMS channel builds it (title, body, no link).
EXPECTED_SQL = """SELECT u.phone, n.title || E'\\n' || n.body FROM notifications n JOIN users u ON u.id = n.user_id
    WHERE n.dedupe_key LIKE 'sms:%'"""


@pytest.fixture
def twilio(stack):
    """The Twilio stand-in, and the worker environment that sends to it."""
    with TwilioServer(callback_delay=0) as server:
        stack["env"].update({name: str(value) for name, value in server.settings().items()})
        # A send fits well inside what the short lease leaves (app/config.py checks it at start).
        stack["env"].update(SMS_PROVIDER="twilio", SMS_TIMEOUT="2", DELIVERY_LEASE_SECONDS="8")
        yield server


def arrivals(twilio: TwilioServer) -> Counter:
    return Counter((message.to, message.body) for message in twilio.received)


def test_kill_9_worker_three_times_with_sms_in_flight_loses_nothing(app, stack, twilio, record_property):
    with app.app_context():
        for statement in SETUP_SQL:
            db.session.execute(sa.text(statement), {"n": MEMBERS})
        ids = sorted(db.session.execute(sa.text(DELIVERIES_SQL)).scalars())
        expected = {tuple(row) for row in db.session.execute(sa.text(EXPECTED_SQL))}
        db.session.commit()
        assert len(ids) == len(expected) == MEMBERS
        assert enqueue_deliveries("default", "sms", ids)
    stack["start"]("sweeper", "sweep")

    killed_at = []
    for number, threshold in enumerate(KILL_AT, start=1):
        worker = stack["start"](f"worker{number}", "worker")
        wait_for(lambda t=threshold: len(twilio.received) >= t, 60, f"worker {number} to send {threshold} SMS")
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(5)
        killed_at.append(len(twilio.received))
        assert killed_at[-1] < MEMBERS, "the worker finished before it could be killed"

    stack["start"]("worker-last", "worker")
    with app.app_context():
        wait_for(lambda: load.status_counts().get("sent", 0) == MEMBERS, DEADLINE_SECONDS, "every row to be sent")

    arrived = arrivals(twilio)
    duplicates = sum(n - 1 for n in arrived.values())
    summary = (
        f"sms kill -9 x{len(KILL_AT)} after {killed_at} SMS: deliveries={len(arrived)} duplicates={duplicates} "
        f"refused={len(twilio.rejected)}"
    )
    print(summary)
    record_property("chaos", summary)
    assert set(arrived) == expected  # none lost, nothing foreign
    assert max(arrived.values()) <= 2  # a delivery goes at most twice
    assert duplicates <= len(KILL_AT)  # at most one duplicate per kill: the row in flight at it
    # A kill while a request is half written leaves the stand-in a body cut short, which it drops as a real
    # server does (the row goes again whole): nothing is refused.
    assert twilio.rejected == []
