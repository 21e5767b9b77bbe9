"""Scheduled notifications released set-based: one statement, preferences and mutes at release, exactly once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app import unitofwork
from app.extensions import db
from app.notify import schedule
from app.notify.service import notify
from app.queueing import get_queue
from app.sweeper import release_scheduled, sweep_once
from tests.factories import NotificationTypeFactory, PreferenceFactory, UserFactory
from tests.support.redis_watch import RedisWatch, user_event


def schedule_for(users, type_="comment", title="Reminder", **fields):
    """Schedule one notification per user an hour ahead; return the result."""
    return schedule.schedule(
        [u.external_id for u in users],
        type_=type_,
        title=title,
        body="Body",
        dedupe_key=fields.pop("dedupe_key", f"{type_}:{title}"),
        send_at=datetime.now(UTC) + timedelta(hours=1),
        **fields,
    )


def make_due(where: str = "true") -> None:
    db.session.execute(
        sa.text(f"UPDATE scheduled_notifications SET send_at = now() - interval '1 second' WHERE {where}")
    )


def rows(sql: str, **params) -> list[tuple]:
    return [tuple(r) for r in db.session.execute(sa.text(sql), params)]


def queued(name: str) -> list[tuple]:
    return [tuple(job.args) for job in get_queue(name).get_jobs()]


@pytest.fixture
def types():
    NotificationTypeFactory(type="comment", default_email=True, priority="default")
    NotificationTypeFactory(type="otp", default_email=True, priority="high")


def test_due_rows_are_released_in_one_statement_with_their_own_content(app, types):
    users = UserFactory.create_batch(3)
    schedule_for(users, title="Comment", data={"n": 1}, group_key="post:1", cancellation_key="c")
    schedule_for(users[:2], type_="otp", title="Code")
    schedule_for(users, title="Not yet")
    make_due("title <> 'Not yet'")
    statements = []

    def record(conn, cursor, statement, *args):
        statements.append(statement)

    sa.event.listen(db.engine, "before_cursor_execute", record)
    try:
        assert schedule.release_due(1000) == 5
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", record)
    # One statement moves every due row, whatever their number (besides a settings line and a type lookup).
    assert len([s for s in statements if "scheduled_notifications" in s]) == 1 and len(statements) <= 3

    released = rows(
        "SELECT user_id, type, title, data, group_key, cancellation_key, read_at FROM notifications ORDER BY id"
    )
    assert sorted((r[0], r[1], r[2]) for r in released) == sorted(
        [(u.id, "comment", "Comment") for u in users] + [(u.id, "otp", "Code") for u in users[:2]]
    )
    comment = next(r for r in released if r[1] == "comment")
    assert (comment[3], comment[4], comment[5], comment[6]) == ({"n": 1}, "post:1", "c", None)
    assert rows("SELECT title FROM scheduled_notifications") == [("Not yet",)] * 3
    assert rows("SELECT count(*) FROM notification_deliveries WHERE status = 'pending'") == [(5,)]


def test_after_the_commit_jobs_go_per_queue_in_batches_and_badges_with_a_toast(app, types, redis_client):
    users = UserFactory.create_batch(3)
    schedule_for(users, title="Comment")
    schedule_for(users[:1], type_="otp", title="Code")
    make_due()
    watch = RedisWatch(users=[u.id for u in users])

    assert release_scheduled() == 4
    assert unitofwork.wait_idle(app)

    (default_job,) = queued("default")  # one job for the batch, not one per row
    assert default_job[0] == "email" and len(default_job[1]) == 3
    (high_job,) = queued("high")
    assert high_job[0] == "email" and len(high_job[1]) == 1
    events = []
    while (event := watch.next_event(0.5)) is not None:
        events.append(event)
    channels = {channel for channel, _ in events}
    assert channels == {user_event(u.id) for u in users}
    assert {event["toast"]["title"] for _, event in events} == {"Comment", "Code"}
    watch.close()


def test_preferences_are_resolved_at_release(app, types):
    user, other = UserFactory.create_batch(2)
    schedule_for([user, other])
    PreferenceFactory(user_id=user.id, type="comment", channel="email", enabled=False)
    PreferenceFactory(user_id=other.id, type="otp", channel="email", enabled=False)  # another type: no effect
    make_due()
    schedule.release_due(100)
    pending = rows("SELECT n.user_id FROM notification_deliveries d JOIN notifications n ON n.id = d.notification_id")
    assert pending == [(other.id,)]


def test_a_thread_muted_before_the_release_is_stored_read_without_email_or_badge(app, types, redis_client):
    user, other = UserFactory.create_batch(2)
    schedule_for([user, other], group_key="post:5")
    db.session.execute(
        sa.text("INSERT INTO notification_mutes (user_id, group_key) VALUES (:u, 'post:5')"), {"u": user.id}
    )
    make_due()
    watch = RedisWatch(users=[user.id, other.id])

    release_scheduled()
    assert unitofwork.wait_idle(app)

    state = dict(
        (r[0], r[1:])
        for r in rows(
            "SELECT n.user_id, n.in_app, n.read_at IS NOT NULL, d.status, d.skip_reason FROM notifications n "
            "JOIN notification_deliveries d ON d.notification_id = n.id"
        )
    )
    assert state == {user.id: (False, True, "skipped", "muted"), other.id: (True, False, "pending", None)}
    assert watch.next_event()[0] == user_event(other.id)
    assert watch.next_event(0.3) is None
    assert [len(job[1]) for job in queued("default")] == [1]
    watch.close()


def test_a_dedupe_key_sent_meanwhile_drops_the_scheduled_row(app, types):
    user, other = UserFactory.create_batch(2)
    schedule_for([user, other], dedupe_key="remind:1")
    notify([user.external_id], type_="comment", title="Sent now", body="", dedupe_key="remind:1")
    make_due()
    assert schedule.release_due(100) == 2
    assert sorted(rows("SELECT user_id, title FROM notifications")) == sorted(
        [(user.id, "Sent now"), (other.id, "Reminder")]
    )
    assert rows("SELECT count(*) FROM scheduled_notifications") == [(0,)]
    assert rows("SELECT count(*) FROM notification_deliveries") == [(2,)]


def test_release_batches_until_nothing_is_due(app, types, monkeypatch):
    monkeypatch.setitem(app.config, "SCHEDULER_BATCH_SIZE", 2)
    schedule_for(UserFactory.create_batch(5))
    make_due()
    assert release_scheduled() == 5
    assert rows("SELECT count(*) FROM notifications") == [(5,)]
    assert sweep_once()["scheduled"] == 0


# --- two sweepers ------------------------------------------------------------------------------------


def _committed_schedule(app, users: int, per_user: int) -> None:
    with app.app_context():
        NotificationTypeFactory(type="comment", default_email=True)
        people = UserFactory.create_batch(users)
        for n in range(per_user):
            schedule_for(people, title=f"Reminder {n}")
        make_due()
        db.session.commit()


@pytest.mark.committed
def test_a_release_holding_rows_makes_a_second_one_skip_them(app):
    _committed_schedule(app, 10, 1)
    first_started, second_done = threading.Event(), threading.Event()
    results = {}

    def first():
        with app.app_context():
            results["first"] = schedule.release_due(1000)
            first_started.set()
            second_done.wait(10)  # keep the rows locked until the second release has run
            db.session.commit()

    def second():
        with app.app_context():
            first_started.wait(10)
            results["second"] = schedule.release_due(1000)  # must not block, must not take them
            db.session.commit()
            second_done.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == {"first": 10, "second": 0}
    with app.app_context():
        assert rows("SELECT count(*), count(DISTINCT user_id) FROM notifications") == [(10, 10)]


@pytest.mark.committed
def test_two_sweepers_release_each_due_row_exactly_once(app, monkeypatch):
    monkeypatch.setitem(app.config, "SCHEDULER_BATCH_SIZE", 50)  # many small batches, so they interleave
    _committed_schedule(app, 100, 10)
    barrier = threading.Barrier(2)
    released: list[int] = []

    def sweeper():
        with app.app_context():
            barrier.wait()
            released.append(release_scheduled())
            db.session.remove()

    threads = [threading.Thread(target=sweeper) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert unitofwork.wait_idle(app)

    assert sum(released) == 1000 and len(released) == 2
    with app.app_context():
        assert rows("SELECT count(*) FROM scheduled_notifications") == [(0,)]
        assert rows("SELECT count(*) FROM notifications") == [(1000,)]
        assert rows("SELECT count(*) FROM notification_deliveries") == [(1000,)]
        enqueued = [i for job in queued("default") for i in job[1]]
        assert len(enqueued) == len(set(enqueued)) == 1000
