"""Chaos: two sweeper processes side by side take every kind of due row exactly once.

No worker runs, so every job either sweeper enqueues stays in Redis to be counted per row, and every
badge event is heard on pub/sub. Due rows of each kind: retries, lost jobs, expired leases, scheduled
notifications and an announcement that fall due while both sweep, ended snoozes, daily digests, due
campaigns, bulk DLQ operations and the webhook outbox. Then one sweeper is killed with -9 (perhaps
holding the lock mid-pass) and the other must carry on alone. Bounded: about 15 s.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

import pytest
import sqlalchemy as sa
from rq.job import Job

from app.announcements.live import watermark_key
from app.extensions import db, redis
from app.queueing import BULK_OPERATION_JOB, DELIVER_BATCH_JOB, DIGEST_JOB, FANOUT_JOB, QUEUE_NAMES, get_queue
from tests.support.redis_watch import RedisWatch, user_event
from tests.support.waiting import wait_for

pytestmark = pytest.mark.chaos

PER_KIND = 4
PASSES = 10  # passes the two make together after the last row fell due, before the rows are counted

SEED_SQL = [
    """INSERT INTO notification_types (type, label, default_email) VALUES ('comment', 'Comments', true)""",
    """INSERT INTO notification_types (type, label, default_email, email_frequency)
       VALUES ('follow', 'New followers', true, 'daily')""",
    """INSERT INTO users (email, display_name, external_id, timezone)
       SELECT 'two' || g || '@example.com', 'User ' || g, 'two-' || g, 'UTC' FROM generate_series(1, 5 * :n) g""",
    # Users 1..n: three notifications each, whose e-mail rows are a retry that fell due, a row whose job
    # Redis lost ten minutes ago, and a row whose worker died (lease expired).
    """INSERT INTO notifications (user_id, type, title, body, dedupe_key)
       SELECT id, 'comment', k, 'Body', k || ':' || id FROM users CROSS JOIN unnest(ARRAY['retry', 'lost', 'lease']) k
       WHERE id <= :n""",
    """INSERT INTO notification_deliveries (notification_id, user_id, channel, status, updated_at, next_attempt_at,
                                            locked_until)
       SELECT n.id, n.user_id, 'email', s.status, now() - s.age, now() - s.due, s.lease
       FROM notifications n JOIN (VALUES
         ('retry', 'pending', interval '10 seconds', interval '1 second', NULL::timestamptz),
         ('lost', 'pending', interval '10 minutes', interval '10 minutes', NULL),
         ('lease', 'sending', interval '1 minute', interval '1 minute', now() - interval '1 second')
       ) s(title, status, age, due, lease) USING (title)""",
    # Users n+1..2n: a snooze that has ended.
    """INSERT INTO notifications (user_id, type, title, body, dedupe_key, snoozed_until, read_at)
       SELECT id, 'comment', 'Snoozed', 'Body', 'snooze:' || id, now() - interval '1 second', now()
       FROM users WHERE id > :n AND id <= 2 * :n""",
    # Users 2n+1..3n: a scheduled notification due two seconds from now, while both sweepers run.
    """INSERT INTO scheduled_notifications (user_id, type, title, body, dedupe_key, send_at)
       SELECT id, 'comment', 'Later', 'Body', 'later:' || id, now() + interval '2 seconds'
       FROM users WHERE id > 2 * :n AND id <= 3 * :n""",
    # Users 3n+1..4n: e-mails waiting two days for their daily digest.
    """INSERT INTO notifications (user_id, type, title, body, dedupe_key, created_at)
       SELECT id, 'follow', 'Someone followed you', 'Body', 'follow:' || id, now() - interval '2 days'
       FROM users WHERE id > 3 * :n AND id <= 4 * :n""",
    """INSERT INTO notification_deliveries (notification_id, user_id, channel, status, skip_reason)
       SELECT id, user_id, 'email', 'skipped', 'digested' FROM notifications WHERE type = 'follow'""",
    """INSERT INTO announcements (title, body, published_at) VALUES ('News', 'Body', now() + interval '2 seconds')""",
    """INSERT INTO campaigns (name, type, title, body, status, scheduled_at)
       SELECT 'c' || g, 'comment', 'Campaign', 'Body', 'scheduled', now() - interval '1 second'
       FROM generate_series(1, :n) g""",
    """INSERT INTO bulk_operations (kind, status) SELECT 'replay', 'queued' FROM generate_series(1, :n)""",
    """INSERT INTO webhook_endpoints (url, event_types, secret_sealed, secret_hint)
       VALUES ('http://127.0.0.1:9/hook', ARRAY['notification.read'], 'sealed', 'hint')""",
    """INSERT INTO webhook_deliveries (endpoint_id, webhook_id, event_type, payload, occurred_at, updated_at,
                                       next_attempt_at)
       SELECT e.id, 'msg_' || g, 'notification.read', '{}', now(), now() - interval '10 seconds',
              now() - interval '1 second'
       FROM webhook_endpoints e CROSS JOIN generate_series(1, :n) g""",
]


def jobs_per_row() -> Counter:
    """(function, channel, row id) → how many queued jobs carry it, counting a job id queued twice twice."""
    counts: Counter = Counter()
    for name in QUEUE_NAMES:
        queue = get_queue(name)
        for job_id in queue.get_job_ids():
            job = Job.fetch(job_id, connection=queue.connection, serializer=queue.serializer)
            if job.func_name in (FANOUT_JOB, BULK_OPERATION_JOB):
                counts[(job.func_name, None, job.args[0])] += 1
            elif len(job.args) == 2:  # deliver_batch(channel, ids)
                counts.update((job.func_name, job.args[0], id_) for id_ in job.args[1])
            else:  # send_digests(run ids)
                counts.update((job.func_name, None, id_) for id_ in job.args[0])
    return counts


class Ears:
    """Every badge and broadcast event published while the sweepers run, heard by a stand-in node holding the users."""

    def __init__(self, users: list[int]) -> None:
        self.watch = RedisWatch(users=users)
        self.heard: list[tuple[str, dict]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._listen, daemon=True)
        self.thread.start()

    def _listen(self) -> None:
        while not self.stop.is_set():
            event = self.watch.next_event(timeout=0.2)
            if event:
                self.heard.append(event)

    def close(self) -> list[tuple[str, dict]]:
        self.stop.set()
        self.thread.join(5)
        self.watch.close()
        return self.heard


def wait_for_passes(n: int) -> None:
    """Wait until n more passes have finished: each one moves the announcement watermark (app/announcements/live.py)."""
    seen = {redis.client().get(watermark_key())}
    wait_for(lambda: seen.add(redis.client().get(watermark_key())) or len(seen) > n, 30, f"{n} sweeper passes")


def query(sql: str) -> list:
    db.session.rollback()
    return db.session.execute(sa.text(sql)).all()


def test_two_sweepers_release_enqueue_and_digest_each_row_once(app, stack):
    with app.app_context():
        for statement in SEED_SQL:
            db.session.execute(sa.text(statement), {"n": PER_KIND})
        db.session.commit()
        ears = Ears([user_id for (user_id,) in query("SELECT id FROM users")])
    stack["env"].update(SWEEP_INTERVAL_SECONDS="0.2", SCHEDULER_INTERVAL_SECONDS="0.1",
                        SWEEP_REQUEUE_AFTER_SECONDS="300")  # fmt: skip  # no honest re-enqueue within the test
    sweepers = [stack["start"](f"sweeper{i}", "sweep") for i in (1, 2)]

    with app.app_context():
        wait_for(lambda: query("SELECT count(*) FROM scheduled_notifications")[0][0] == 0, 20, "the scheduled release")
        wait_for_passes(PASSES)
        assert all(proc.poll() is None for proc in sweepers), "a sweeper died"
        # kill -9 one of them (perhaps mid-pass, holding the lock): the other must take the next row alone.
        os.killpg(sweepers[0].pid, signal.SIGKILL)
        sweepers[0].wait(5)
        late = db.session.execute(
            sa.text("INSERT INTO bulk_operations (kind) VALUES ('discard') RETURNING id")
        ).scalar()
        db.session.commit()
        wait_for(lambda: jobs_per_row()[(BULK_OPERATION_JOB, None, late)] == 1, 15, "the survivor to take over")
        wait_for_passes(3)
        sweepers[1].terminate()
        sweepers[1].wait(10)
        heard = ears.close()
        jobs = jobs_per_row()
        deliveries = query("SELECT id, status, attempts FROM notification_deliveries WHERE skip_reason IS NULL")
        runs = query("SELECT id FROM digest_runs")
        campaigns = [row.id for row in query("SELECT id FROM campaigns")]
        operations = [row.id for row in query("SELECT id FROM bulk_operations")]
        hooks = [row.id for row in query("SELECT id FROM webhook_deliveries")]
        snoozers = [row.user_id for row in query("SELECT user_id FROM notifications WHERE title = 'Snoozed'")]
        released = [row.user_id for row in query("SELECT user_id FROM notifications WHERE title = 'Later'")]

    doubled = {key: n for key, n in jobs.items() if n > 1}
    print(f"two sweepers: {sum(jobs.values())} row-jobs, {len(heard)} events, doubled: {doubled}")
    assert doubled == {}
    # Each delivery row (retry, lost, expired lease, and each scheduled release's e-mail) has one job;
    # the expired lease counted one try, not one per sweeper.
    assert {(f, id_) for f, ch, id_ in jobs if ch == "email"} == {(DELIVER_BATCH_JOB, r.id) for r in deliveries}
    assert sorted(r.attempts for r in deliveries) == [0] * (len(deliveries) - PER_KIND) + [1] * PER_KIND
    assert len(deliveries) == 4 * PER_KIND
    assert len(runs) == PER_KIND  # one digest run per user and period
    assert {id_ for f, ch, id_ in jobs if f == DIGEST_JOB} == {r.id for r in runs}
    assert {id_ for f, _, id_ in jobs if f == FANOUT_JOB} == set(campaigns)
    assert {id_ for f, _, id_ in jobs if f == BULK_OPERATION_JOB} == set(operations)
    assert {id_ for f, ch, id_ in jobs if ch == "webhook"} == set(hooks)
    # One badge event per woken or released user (the snooze's with its toast), one broadcast.
    with app.app_context():
        per_channel = Counter(channel for channel, _ in heard)
        assert per_channel == Counter({user_event(u): 1 for u in snoozers + released} | {"all": 1})
    assert len(released) == PER_KIND
