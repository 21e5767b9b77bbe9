"""The quota counter against the real Redis: every limit checked, all taken or none, on the server's clock."""

from __future__ import annotations

import time

import pytest

from app.extensions import redis
from app.quotas import counter
from app.quotas.counter import Left, Quota, Refusal
from tests.support.waiting import free_port


@pytest.fixture
def fresh_memory(monkeypatch):
    monkeypatch.setattr(counter, "_memory", counter._Memory())
    return counter._memory


def test_a_rate_allows_its_burst_then_refuses_until_a_request_is_due(app, fresh_memory):
    quota = Quota("key:1", rate=2, burst=3)
    answers = [counter.take([quota], 1) for _ in range(4)]
    assert [a[0].requests for a in answers[:3]] == [2, 1, 0]
    refusal = answers[3]
    assert isinstance(refusal, Refusal) and (refusal.kind, refusal.limit, refusal.remaining) == ("rate", 3, 0)
    assert refusal.reset_seconds == 1  # half a second to the next request, said in whole seconds
    time.sleep(0.55)
    assert isinstance(counter.take([quota], 1), list)  # one is due again


def test_a_daily_quota_counts_notifications_and_says_what_is_left(app, fresh_memory):
    quota = Quota("key:2", daily=10)
    assert counter.take([quota], 4) == [Left(quota, None, 6)]
    refusal = counter.take([quota], 7)
    assert (refusal.kind, refusal.limit, refusal.remaining) == ("daily", 10, 6)
    assert 0 < refusal.reset_seconds <= counter.DAY_SECONDS  # the next UTC midnight
    assert counter.take([quota], 6) == [Left(quota, None, 0)]


def test_a_refusal_by_one_subject_takes_nothing_from_the_others(app, fresh_memory):
    key, tenant = Quota("key:3", rate=100, daily=100), Quota("tenant:acme", daily=5)
    assert isinstance(counter.take([key, tenant], 6), Refusal)
    [key_left, tenant_left] = counter.take([key, tenant], 5)
    assert (key_left.notifications, tenant_left.notifications) == (95, 0)  # the refused 6 counted nowhere
    assert key_left.requests == 99  # nor its request


def test_a_refund_gives_the_daily_notifications_back(app, fresh_memory):
    quota = Quota("key:4", daily=3)
    counter.take([quota], 3)
    counter.refund([quota], 2)
    assert counter.take([quota], 2) == [Left(quota, None, 0)]


def test_unlimited_subjects_cost_no_round_trip(app, fresh_memory, monkeypatch):
    monkeypatch.setattr(counter, "_script", lambda: pytest.fail("no script for no limits"))
    assert counter.take([Quota("key:5")], 10) == []


def test_the_keys_share_one_hash_tag_so_a_cluster_runs_the_script_on_one_node(app):
    keys = counter._keys(Quota("tenant:x"), "20261203") + counter._keys(Quota("key:9"), "20261203")
    assert {key.split("{")[1].split("}")[0] for key in keys} == {"quotas"}
    day_key = keys[1]
    quota = Quota("tenant:x", daily=5)
    with app.app_context():
        counter.take([quota], 2)
        stored = redis.realtime().get(counter._keys(quota, counter._day(time.time()))[1])
    assert int(stored) == 2 and day_key.endswith(":day:20261203")


def test_while_the_store_is_away_each_process_counts_in_memory(app, fresh_memory, monkeypatch):
    dead = __import__("redis").Redis(port=free_port(), socket_connect_timeout=0.2)
    monkeypatch.setattr(counter.redis, "realtime", lambda: dead)
    quota = Quota("key:6", daily=2)
    assert counter.take([quota], 2) == [Left(quota, None, 0)]
    assert fresh_memory.failed_until > time.monotonic()  # the store is tried again after FALLBACK_SECONDS
    assert counter.take([quota], 1).kind == "daily"
    counter.refund([quota], 1)
    assert counter.take([quota], 1) == [Left(quota, None, 0)]
