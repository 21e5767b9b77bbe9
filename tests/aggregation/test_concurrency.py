"""Exactly once under concurrency: 20 simultaneous API events of one thread, on two real web processes."""

from __future__ import annotations

import threading
import urllib.error

import pytest
import sqlalchemy as sa

from app.delivery.due import take_due
from app.extensions import db
from jobs.delivery import deliver_batch
from tests.aggregation.test_window_close import close_windows
from tests.factories import NotificationTypeFactory, UserFactory
from tests.realtime.helpers import api_notify, create_api_key

pytestmark = pytest.mark.committed

EVENTS = 20


def test_twenty_simultaneous_events_make_one_row_with_count_20_and_one_email(app, two_processes, fake_provider):
    first, second = two_processes
    with app.app_context():
        NotificationTypeFactory(type="comment", default_email=True, aggregation_window=300)
        UserFactory(external_id="author", email="author@example.com")
        db.session.commit()
        db.session.remove()
    key = create_api_key(app)
    start = threading.Barrier(EVENTS)
    answers: list = []
    errors: list = []

    def send(n: int) -> None:
        server = (first, second)[n % 2]
        start.wait(10)
        try:
            for _ in range(2):  # each event twice: its dedupe key makes the repeat a no-op
                answers.append(
                    api_notify(
                        server.base_url,
                        key,
                        "author",
                        "commented",
                        group_key="post:1",
                        dedupe_key=f"c:{n}",
                        actor={"id": f"u{n}", "name": f"User {n}"},
                    )
                )
        except (urllib.error.URLError, AssertionError) as exc:  # reported below, with the thread's event
            errors.append((n, exc))

    threads = [threading.Thread(target=send, args=(n,)) for n in range(EVENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert sum(a["created"] for a in answers) == EVENTS and sum(a["existing"] for a in answers) == EVENTS
    assert len({a["results"][0]["notification_id"] for a in answers}) == 1

    rows = db.session.execute(sa.text("SELECT event_count, actor_count, title FROM notifications")).all()
    assert [(r.event_count, r.actor_count) for r in rows] == [(EVENTS, EVENTS)]
    assert rows[0].title.endswith(f"and {EVENTS - 1} others: commented")
    assert db.session.execute(sa.text("SELECT count(*) FROM notification_events")).scalar() == EVENTS

    close_windows()
    due = take_due(30, 100, [])
    db.session.commit()
    assert list(due) == [("default", "email")] and len(due["default", "email"]) == 1
    assert deliver_batch("email", due["default", "email"])["sent"] == 1
    assert [m.subject for m in fake_provider.sent] == [rows[0].title]
