"""Chaos: 1,000 users with a daily digest due; kill -9 the worker mid-run and start another one.

Real sweeper and worker processes, an aiosmtpd sink in its own process, counted by Message-ID (each
digest run's ledger id). Bounded: 120 s at most.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest
import sqlalchemy as sa

from app.extensions import db
from tests.support import processes
from tests.support.waiting import wait_for

pytestmark = pytest.mark.chaos

USERS = 1000
DEADLINE_SECONDS = 120

SEED_SQL = [
    """INSERT INTO notification_types (type, label, default_email, email_frequency)
       VALUES ('follow', 'New followers', true, 'daily')""",
    """INSERT INTO users (email, display_name, external_id, timezone)
       SELECT 'digest' || g || '@example.com', 'User ' || g, 'digest-' || g,
              CASE g % 3 WHEN 0 THEN 'UTC' WHEN 1 THEN 'America/New_York' ELSE 'Asia/Tokyo' END
       FROM generate_series(1, :users) g""",
    # Two days old: before every user's latest 09:00, whatever their zone, so every daily digest is due.
    """INSERT INTO notifications (user_id, type, title, body, dedupe_key, created_at)
       SELECT u.id, 'follow', 'Someone followed you ' || g, 'Body', 'chaos:' || u.id || ':' || g,
              now() - interval '2 days'
       FROM users u CROSS JOIN generate_series(1, 3) g""",
    """INSERT INTO notification_deliveries (notification_id, user_id, channel, status, skip_reason)
       SELECT id, user_id, 'email', 'skipped', 'digested' FROM notifications""",
]


def sent_runs() -> int:
    db.session.rollback()
    return db.session.execute(sa.text("SELECT count(*) FROM digest_runs WHERE status = 'sent'")).scalar()


def test_kill_9_worker_mid_digest_run_sends_each_digest_once(app, stack, record_property):
    with app.app_context():
        for statement in SEED_SQL:
            db.session.execute(sa.text(statement), {"users": USERS})
        db.session.commit()
    stack["start"]("sweeper", "sweep")
    worker = stack["start"]("worker1", "worker")

    wait_for(lambda: len(processes.message_ids(stack["log"])) >= 150, 60, "the first worker to send 150 digests")
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(5)
    killed_at = len(processes.message_ids(stack["log"]))
    assert killed_at < USERS, "the worker finished before it could be killed"

    stack["start"]("worker2", "worker")
    with app.app_context():
        wait_for(lambda: sent_runs() == USERS, DEADLINE_SECONDS, "every digest to be sent")
        runs = db.session.execute(sa.text("SELECT count(*), count(DISTINCT user_id) FROM digest_runs")).one()
        ledger_ids = db.session.execute(sa.text("SELECT ledger_id FROM digest_runs")).scalars().all()

    arrived = Counter(processes.message_ids(stack["log"]))
    duplicates = sum(n - 1 for n in arrived.values())
    summary = f"digests, kill -9 after {killed_at} arrivals: sent={len(arrived)} duplicates={duplicates}"
    print(summary)
    record_property("chaos", summary)
    assert tuple(runs) == (USERS, USERS)  # one run per user and period, however often the sweeper passed
    assert set(arrived) == {f"<delivery-{i}@hato.127.0.0.1>" for i in ledger_ids}  # exactly the 1,000, none lost
    # SMTP has no transaction: only a digest the sink accepted in the instant before the kill, not yet
    # recorded, can go again, and with the same Message-ID (receivers drop it).
    assert duplicates <= 1
