"""Coalesced live deliveries: many commits' ids on one drain list, one drain job, the sweeper as backstop."""

from __future__ import annotations

import pytest

from app import queueing
from app.queueing import DRAIN_JOB, coalesce_deliveries, get_queue, start_drain, take_coalesced
from app.sweeper import idle_queues, wake_drains
from jobs.delivery import drain_deliveries
from tests.support.delivery import reload

# The engine records each send on its own autocommit connection (as in production), so these tests commit.
pytestmark = pytest.mark.committed


def drain_jobs(queue: str) -> list[tuple]:
    return [tuple(job.args) for job in get_queue(queue).jobs if job.func_name == DRAIN_JOB]


def test_many_commits_share_one_drain_job_that_sends_them_all(app, smtp_sink, make_delivery):
    ids = [make_delivery().id for _ in range(3)]
    for id_ in ids:  # one commit each, as live API calls do
        assert coalesce_deliveries("default", "email", [id_])

    assert drain_jobs("default") == [("default", "email")]
    counts = drain_deliveries("default", "email")

    assert counts["sent"] == 3 and counts["batches"] == 1 and "handed_over" not in counts
    assert sorted(m.message["Message-ID"] for m in smtp_sink.messages) == sorted(
        f"<delivery-{i}@hato.127.0.0.1>" for i in ids
    )
    assert take_coalesced("default", "email", 10) == []


def test_a_commit_after_the_drain_started_wakes_another_drain(app):
    assert coalesce_deliveries("high", "push", [1])
    start_drain("high", "push")  # a drain job began: the flag is cleared before it looks at the list
    assert coalesce_deliveries("high", "push", [2])
    assert coalesce_deliveries("high", "push", [3])  # the second drain is already waiting

    assert drain_jobs("high") == [("high", "push"), ("high", "push")]
    assert take_coalesced("high", "push", 10) == [1, 2, 3]


def test_drain_yields_to_a_higher_queue_and_wakes_a_fresh_job(app, smtp_sink, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "DELIVERY_BATCH_SIZE", 1)
    deliveries = [make_delivery() for _ in range(3)]
    ids = [d.id for d in deliveries]
    assert coalesce_deliveries("low", "email", ids)
    assert coalesce_deliveries("high", "email", [10**9])  # live work arrives on a higher queue

    counts = drain_deliveries("low", "email")

    assert (counts["sent"], counts["batches"], counts["handed_over"]) == (1, 1, 1)
    assert drain_jobs("low") == [("low", "email"), ("low", "email")]  # the first one ran in this test directly
    assert [reload(d).status for d in deliveries] == ["sent", "pending", "pending"]
    assert take_coalesced("low", "email", 10) == ids[1:]


def test_drain_hands_over_when_its_time_is_up(app, smtp_sink, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "DELIVERY_BATCH_SIZE", 2)
    monkeypatch.setitem(app.config, "DELIVERY_DRAIN_SECONDS", 0.0)
    ids = [make_delivery().id for _ in range(5)]
    assert coalesce_deliveries("default", "email", ids)

    counts = drain_deliveries("default", "email")

    assert (counts["sent"], counts["handed_over"]) == (2, 1)
    assert len(drain_jobs("default")) == 2 and take_coalesced("default", "email", 10) == ids[2:]


def test_the_sweeper_wakes_a_list_whose_drain_died(app, redis_client):
    list_key = queueing.drain_keys("default", "email")[0]
    redis_client.rpush(list_key, 7, 8)  # ids pushed, then the drain that cleared the flag was killed
    redis_client.sadd(queueing._drain_channels_key(), "email")  # as coalesce_deliveries records the list

    assert wake_drains() == 1 and drain_jobs("default") == [("default", "email")]
    assert wake_drains() == 0  # its flag is set: one waiting drain is enough


def test_coalesced_ids_count_against_an_idle_queue(app, redis_client, monkeypatch):
    monkeypatch.setitem(app.config, "DELIVERY_BATCH_SIZE", 10)
    assert "low" in idle_queues()
    redis_client.rpush(queueing.drain_keys("low", "push")[0], *range(111))  # 12 batches' worth
    redis_client.sadd(queueing._drain_channels_key(), "push")

    assert "low" not in idle_queues() and "default" in idle_queues()


def test_any_channel_coalesces_and_the_sweeper_finds_its_list(app, redis_client):
    assert coalesce_deliveries("default", "webhook", [5])

    [job] = get_queue("default").jobs
    assert job.func_name == queueing.DRAIN_JOB and job.args == ["default", "webhook"]
    assert queueing.coalesced_waiting(["default"]) == {"default": 1}
    redis_client.delete(queueing.drain_keys("default", "webhook")[1])  # its drain died before it started
    get_queue("default").empty()
    assert wake_drains() == 1
