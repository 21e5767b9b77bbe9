"""Backpressure: the high queue's lag, the hold of low work it starts and ends, batches that step aside."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from rq.serializers import JSONSerializer

from app import backpressure, sweeper
from app.cli.worker import AppSimpleWorker
from app.delivery import engine
from app.extensions import db, redis
from app.keyspace import key
from app.providers.fake import FAKE
from app.queue_state import queue_lags
from app.queueing import coalesce_deliveries, enqueue_deliveries, get_queue
from tests.factories import NotificationTypeFactory
from tests.support.backpressure import age, forget_measurements, queued_job


@pytest.fixture(autouse=True)
def fresh_measurements(monkeypatch):
    forget_measurements(monkeypatch)


def lost_drain(queue: str, lives: float) -> None:
    """Ids coalesced on queue's e-mail list whose drain job was lost; the wake flag runs out in `lives` s.

    The flag is set for DRAIN_WAKE_TTL_SECONDS (60), so it looks 60 - lives seconds old.
    """
    assert coalesce_deliveries(queue, "email", [1, 2])
    get_queue(queue).empty()  # the drain job is gone, its flag and the ids stay
    redis.client().pexpire(key("drain-wake", queue, "email"), int(lives * 1000))


def test_each_queues_lag_is_its_oldest_jobs_wait_read_in_one_round_trip(app, monkeypatch):
    assert queue_lags() == {"high": 0.0, "default": 0.0, "low": 0.0}

    queued_job("high", waited=5)
    queued_job("high")  # behind it: the head is the oldest
    queued_job("low", waited=30)
    client, calls = redis.client(), []
    real_execute, real_pipeline = client.execute_command, client.pipeline
    monkeypatch.setattr(client, "execute_command", lambda *a, **k: calls.append(a[0]) or real_execute(*a, **k))
    monkeypatch.setattr(client, "pipeline", lambda *a, **k: calls.append("pipeline") or real_pipeline(*a, **k))

    lags = queue_lags()

    assert 5 <= lags["high"] < 6 and 30 <= lags["low"] < 31 and lags["default"] == 0.0
    assert calls == ["EVAL"]


def test_ids_on_a_drain_list_count_from_their_wake_flag_until_a_drain_takes_them(app):
    lost_drain("high", lives=45)
    assert 14.9 <= queue_lags(("high",))["high"] < 16

    redis.client().delete(key("drain-wake", "high", "email"))  # a drain started: it clears the flag first
    assert queue_lags(("high",))["high"] == 0.0


@pytest.mark.committed  # the drain records on its own connection: real commits
def test_a_drain_job_queued_behind_a_running_drain_of_its_list_is_not_lag(app, fake_provider, make_delivery):
    urgent = NotificationTypeFactory(type="otp", default_email=True, priority="high")
    first, second = make_delivery(type_=urgent).id, make_delivery(type_=urgent).id
    db.session.commit()
    assert coalesce_deliveries("high", "email", [first])
    seen = {}
    real_send = FAKE.send

    def send(message):
        if not seen:  # inside the running drain: a new commit wakes a second drain job, which waits
            assert coalesce_deliveries("high", "email", [second])
            age(get_queue("high").get_job_ids()[0], 30)
            seen["aged_at"] = time.monotonic()
            seen["during"] = queue_lags(("high",))["high"]
        return real_send(message)

    FAKE.send = send
    try:
        worker = _worker("worker-one", register=False)
        assert worker.work(burst=True, max_jobs=1) is True  # the first drain only; it sends both
    finally:
        FAKE.send = real_send

    assert seen["during"] < 1  # the running drain takes the ids the queued one was woken for
    # Nothing drains that list now: the queued job counts, 30 s plus however long the run took since.
    assert 30 <= queue_lags(("high",))["high"] <= 30 + (time.monotonic() - seen["aged_at"]) + 0.5
    assert sorted(m.delivery_id for m in FAKE.sent) == [first, second]


def test_low_work_is_held_while_the_high_lag_is_over_the_threshold(app, monkeypatch):
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 2.0)
    job_id = queued_job("high", waited=1)
    assert backpressure.measure().held is False

    age(job_id, 3)
    before = datetime.now(UTC)
    pressure = backpressure.status()
    assert pressure.held and 3 <= pressure.lag < 4 and pressure.threshold == 2.0
    assert before - timedelta(seconds=1) <= pressure.since <= datetime.now(UTC) and pressure.activations == 1

    get_queue("high").empty()  # drained
    pressure = backpressure.status()
    assert (pressure.held, pressure.lag, pressure.since, pressure.activations) == (False, 0.0, None, 1)
    assert redis.client().get(key("backpressure", "since")) is None


def test_a_threshold_of_zero_turns_backpressure_off(app, monkeypatch):
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 0)
    queued_job("high", waited=600)

    assert backpressure.status().held is False
    assert backpressure.keep_free_after_interactive("worker-one") is False


def test_low_work_held_only_concerns_jobs_taken_from_low(app, monkeypatch):
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 2.0)
    queued_job("high", waited=10)

    assert backpressure.low_work_held() is False  # not inside a job: a test, a shell
    with backpressure.running_job_from("default"):
        assert backpressure.low_work_held() is False
    with backpressure.running_job_from("low"):
        assert backpressure.low_work_held() is True


def test_redis_down_holds_nothing(app, monkeypatch):
    from redis.exceptions import ConnectionError as RedisConnectionError

    def down(*args, **kwargs):
        raise RedisConnectionError("connection refused")

    monkeypatch.setattr("app.backpressure.queue_lags", down)
    assert backpressure.measure().held is False


def _worker(name: str, queues=("high", "default", "low"), register: bool = True) -> AppSimpleWorker:
    """A worker of the app's class; registered (as work() would) for tests that call its dequeue directly."""
    connection = redis.client()
    worker = AppSimpleWorker([get_queue(n, connection) for n in queues], connection=connection, name=name,
                             serializer=JSONSerializer)  # fmt: skip
    if register:
        worker.register_birth()
    return worker


def test_a_worker_takes_no_low_job_while_high_lags_and_takes_it_once_the_lag_falls(app, monkeypatch):
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 2.0)
    low_job = queued_job("low")
    lost_drain("high", lives=2.5)  # nothing on high to take, and its lag over the threshold for 2.5 s
    worker = _worker("worker-one")
    try:
        assert worker.dequeue_job_and_maintain_ttl(timeout=1, max_idle_time=1) is None
        assert get_queue("low").get_job_ids() == [low_job]

        job, queue = worker.dequeue_job_and_maintain_ttl(timeout=5)  # the flag runs out: the lag falls
    finally:
        worker.register_death()
    assert (job.id, queue.name) == (low_job, get_queue("low").name)
    assert redis.client().get(key("drain-wake", "high", "email")) is None


def test_high_jobs_are_still_taken_while_low_work_is_held(app, monkeypatch):
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 2.0)
    queued_job("low")
    high_job = queued_job("high", waited=10)
    worker = _worker("worker-one")
    try:
        job, _ = worker.dequeue_job_and_maintain_ttl(timeout=1)
    finally:
        worker.register_death()
    assert job.id == high_job


def test_a_worker_that_ran_interactive_work_offers_to_be_kept_free(app, monkeypatch):
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 2.0)
    queued_job("high")
    assert _worker("interactive-only", queues=("high",), register=False).work(burst=True) is True
    assert redis.client().get(key("backpressure", "reserve")) is None  # it never takes low work anyway

    queued_job("high")
    assert _worker("worker-one", register=False).work(burst=True) is True
    assert redis.client().get(key("backpressure", "reserve")) == b"worker-one"
    assert 0 < redis.client().pttl(key("backpressure", "reserve")) <= backpressure.RESERVE_SECONDS * 1000


def test_one_worker_is_kept_free_of_low_work_while_another_takes_it(app, monkeypatch):
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 2.0)
    one, two = _worker("worker-one"), _worker("worker-two")
    try:
        assert backpressure.keep_free_after_interactive("worker-one") is True
        assert backpressure.keep_free_after_interactive("worker-two") is False  # one at a time
        assert backpressure.status().kept_free == "worker-one"
        low_job = queued_job("low")

        assert one.dequeue_job_and_maintain_ttl(timeout=1, max_idle_time=1) is None
        assert two.dequeue_job_and_maintain_ttl(timeout=1)[0].id == low_job
        low_job = queued_job("low")
        assert one.dequeue_job_and_maintain_ttl(timeout=None)[0].id == low_job  # a burst run is never kept free

        two.register_death()  # alone on low now: it is never kept from it
        low_job = queued_job("low")
        assert one.dequeue_job_and_maintain_ttl(timeout=1)[0].id == low_job
    finally:
        one.register_death()
        two.register_death()


def test_the_worker_kept_free_takes_low_work_that_nobody_else_moves(app, monkeypatch):
    """A worker killed mid-job stays registered until its key expires: low work must not wait for it."""
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 2.0)
    monkeypatch.setattr(backpressure, "LOW_STALL_SECONDS", 2.0)
    one, dead = _worker("worker-one"), _worker("worker-killed")  # registered, and never takes anything
    try:
        backpressure.keep_free_after_interactive("worker-one")
        low_job = queued_job("low")
        assert one.dequeue_job_and_maintain_ttl(timeout=1, max_idle_time=1) is None

        started = time.monotonic()
        job, _ = one.dequeue_job_and_maintain_ttl(timeout=5)
    finally:
        one.register_death()
        dead.register_death()
    assert job.id == low_job and time.monotonic() - started < 4


@pytest.fixture
def pressure_after(app, monkeypatch):
    """Make high work start to lag (over the threshold) right after the fake provider's nth send."""
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 2.0)
    monkeypatch.setattr(backpressure, "CACHE_SECONDS", 0.0)  # the per-row check sees it at the next row
    job_id = queued_job("high")
    real_send = FAKE.send

    def arm(n: int) -> None:
        def send(message):
            receipt = real_send(message)
            if len(FAKE.sent) == n:
                age(job_id, 60)
            return receipt

        monkeypatch.setattr(FAKE, "send", send)

    return arm


def _rows(ids):
    db.session.rollback()
    return db.session.execute(
        sa.text(
            "SELECT d.id, d.status, d.attempts, (SELECT count(*) FROM delivery_attempts a WHERE a.delivery_id = d.id) "
            "FROM notification_deliveries d WHERE d.id = ANY(:ids) ORDER BY d.id"
        ),
        {"ids": ids},
    ).all()


@pytest.mark.committed  # the engine records on its own connection: real commits
def test_a_low_batch_hands_its_rest_back_when_high_work_lags_and_it_is_sent_later(
    app, fake_provider, make_delivery, pressure_after
):
    ids = [make_delivery().id for _ in range(6)]
    db.session.commit()
    pressure_after(2)

    with backpressure.running_job_from("low"):
        counts = engine.deliver_batch("email", ids, app.config)

    assert (counts["sent"], counts["released"]) == (2, 4)
    rows = _rows(ids)
    assert [r[1] for r in rows] == ["sent"] * 2 + ["pending"] * 4
    assert [(r[2], r[3]) for r in rows[2:]] == [(0, 0)] * 4  # handed back: no try counted, no attempt row

    # The high queue drains; the sweeper enqueues the rows once due, a worker sends them.
    get_queue("high").empty()
    db.session.rollback()  # the sweeper's pass reads now() in a transaction of its own
    time.sleep(1.1)  # released rows fall due a second later
    assert sweeper.sweep_once()["due"] == 4
    worker = _worker("worker-one", register=False)
    try:
        assert worker.work(burst=True) is True
    finally:
        worker.register_death()
    assert [(r[1], r[2]) for r in _rows(ids)] == [("sent", 1)] * 6
    assert sorted(m.delivery_id for m in FAKE.sent) == ids  # each exactly once


@pytest.mark.committed
@pytest.mark.parametrize("queue", ["high", "default", None])
def test_other_batches_never_step_aside(app, fake_provider, make_delivery, pressure_after, queue):
    ids = [make_delivery().id for _ in range(4)]
    db.session.commit()
    pressure_after(1)

    if queue is None:
        counts = engine.deliver_batch("email", ids, app.config)
    else:
        with backpressure.running_job_from(queue):
            counts = engine.deliver_batch("email", ids, app.config)

    assert counts["sent"] == 4 and "released" not in counts


@pytest.mark.committed
def test_a_worker_marks_the_jobs_it_takes_from_low(app, fake_provider, make_delivery, pressure_after):
    ids = [make_delivery().id for _ in range(3)]
    db.session.commit()
    assert enqueue_deliveries("low", "email", ids)
    pressure_after(1)

    # A worker of low alone, so that the high job stays queued (and lagging) while the low job runs.
    assert _worker("worker-low", queues=("low",), register=False).work(burst=True, max_jobs=1) is True

    assert [r[1] for r in _rows(ids)] == ["sent", "pending", "pending"]


def test_a_low_batch_sends_one_at_a_time_while_interactive_work_shares_busy_cpus(app, monkeypatch):
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 2.0)
    busy = {"load": 99.0}
    monkeypatch.setattr("app.backpressure.os.getloadavg", lambda: (busy["load"], 0.0, 0.0))

    with backpressure.running_job_from("low"):
        assert backpressure.send_width(4) == 4  # no interactive work lately
        backpressure.keep_free_after_interactive("worker-one")
        assert backpressure.send_width(4) == 1
        busy["load"] = 0.1  # the CPUs have room: the sends wait on the network, lanes cost nothing
        assert backpressure.send_width(4) == 4
        busy["load"] = 99.0
    for queue in ("high", "default"):
        with backpressure.running_job_from(queue):
            assert backpressure.send_width(4) == 4
    assert backpressure.send_width(4) == 4  # not inside a job
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 0)
    with backpressure.running_job_from("low"):
        assert backpressure.send_width(4) == 4


@pytest.mark.committed
def test_the_engine_narrows_a_low_batch_to_one_smtp_connection(app, smtp_sink, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "BACKPRESSURE_HIGH_LAG_SECONDS", 2.0)
    monkeypatch.setitem(app.config, "DELIVERY_SEND_CONCURRENCY", 4)
    monkeypatch.setattr("app.backpressure.os.getloadavg", lambda: (99.0, 0.0, 0.0))
    ids = [make_delivery().id for _ in range(8)]
    db.session.commit()
    backpressure.keep_free_after_interactive("worker-one")

    with backpressure.running_job_from("low"):
        assert engine.deliver_batch("email", ids, app.config)["sent"] == 8

    assert len(smtp_sink.messages) == 8 and len({m.peer for m in smtp_sink.messages}) == 1
