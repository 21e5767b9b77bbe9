"""Post-commit hand-off: one thread per process sends requests' Redis work, batched, and survives failures."""

from __future__ import annotations

import json
import threading

import pytest

from app import aftercommit
from app.aftercommit import Dispatcher, Handoff
from app.extensions import redis
from app.queueing import get_queue
from app.realtime.publish import user_channel
from tests.api.test_notifications import next_message


@pytest.fixture
def queues(app):
    """The test Redis's queues, emptied before and after."""
    for name in ("high", "default"):
        get_queue(name).empty()
    yield
    for name in ("high", "default"):
        get_queue(name).empty()


def test_send_makes_one_job_per_queue_and_channel_and_one_event_per_user(app, queues):
    app.config["DELIVERY_BATCH_SIZE"] = 3
    pubsub = redis.client().pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(user_channel(1), user_channel(2))
    try:
        aftercommit.send(
            [
                Handoff("default", {"email": [1, 2], "push": []}, [1], "Shipped"),
                Handoff("default", {"email": [3, 4], "push": [5]}, [2], "Shipped"),
                Handoff("high", {"email": [6], "push": []}, [], None),
            ]
        )
        messages = [next_message(pubsub) for _ in range(2)]
    finally:
        pubsub.close()
    default_jobs = sorted((job.args[0], job.args[1]) for job in get_queue("default").jobs)
    assert default_jobs == [("email", [1, 2, 3]), ("email", [4]), ("push", [5])]
    assert [job.args for job in get_queue("high").jobs] == [["email", [6]]]
    assert sorted(m["channel"].decode() for m in messages) == [user_channel(1), user_channel(2)]
    assert {json.loads(m["data"])["toast"]["title"] for m in messages} == {"Shipped"}


def test_hand_offs_that_pile_up_go_out_together(app, monkeypatch):
    rounds, first_round_started, release = [], threading.Event(), threading.Event()

    def slow_send(batch):
        rounds.append(len(batch))
        first_round_started.set()
        release.wait(5)

    monkeypatch.setattr(aftercommit, "send", slow_send)
    dispatcher = Dispatcher(app)
    dispatcher.submit(Handoff("default", {"email": [1]}, [], None))
    assert first_round_started.wait(5)
    for n in range(2, 12):  # while the thread is busy with the first
        dispatcher.submit(Handoff("default", {"email": [n]}, [], None))
    release.set()
    assert dispatcher.wait_idle(5)
    assert rounds == [1, 10]


def test_a_failing_round_is_logged_and_the_thread_goes_on(app, monkeypatch, caplog):
    sent = []

    def flaky_send(batch):
        if not sent:
            sent.append("failed")
            raise RuntimeError("redis exploded")
        sent.extend(h.pending["email"][0] for h in batch)

    monkeypatch.setattr(aftercommit, "send", flaky_send)
    dispatcher = Dispatcher(app)
    dispatcher.submit(Handoff("default", {"email": [1]}, [], None))
    assert dispatcher.wait_idle(5)
    dispatcher.submit(Handoff("default", {"email": [2]}, [], None))
    assert dispatcher.wait_idle(5)
    assert sent == ["failed", 2]
    assert "post-commit hand-off of 1 requests failed" in caplog.text


def test_nothing_to_send_is_not_handed_over(app, monkeypatch):
    submitted = []
    monkeypatch.setattr(Dispatcher, "submit", lambda self, handoff: submitted.append(handoff))
    with app.test_request_context():
        aftercommit.after_commit("default", {"email": [], "push": []}, [])
        aftercommit.after_commit("default", {"email": [7], "push": []}, [])
    assert [handoff.pending["email"] for handoff in submitted] == [[7]]


def test_an_app_that_never_handed_anything_over_is_idle(app):
    assert aftercommit.wait_idle(app.__class__("untouched"))


def test_a_process_that_cannot_start_the_thread_still_answers(app, monkeypatch, caplog):
    def refuse(*args, **kwargs):
        raise RuntimeError("can't create new thread at interpreter shutdown")

    real_start = aftercommit.threading.Thread.start
    monkeypatch.setattr(aftercommit.threading.Thread, "start", refuse)
    dispatcher = Dispatcher(app)
    dispatcher.submit(Handoff("default", {"email": [1]}, [], None))  # no exception: the rows are committed
    assert dispatcher.wait_idle(0.1)
    assert "post-commit hand-off skipped" in caplog.text
    sent = []
    monkeypatch.setattr(aftercommit.threading.Thread, "start", real_start)
    monkeypatch.setattr(aftercommit, "send", lambda batch: sent.extend(batch))
    dispatcher.submit(Handoff("default", {"email": [2]}, [], None))  # once threads start again, it sends
    assert dispatcher.wait_idle(5) and [h.pending["email"] for h in sent] == [[2]]
