"""The unit of work (app/unitofwork.py): effects follow a commit, never a rollback, merged by one thread per process."""

from __future__ import annotations

import threading
import uuid

import pytest
import sqlalchemy as sa

from app import driversql, unitofwork
from app.announcements import service as announcements
from app.campaigns import fanout
from app.campaigns import service as campaigns
from app.delivery import dlq, due
from app.delivery.ledger_queries import DlqFilters
from app.extensions import db, redis
from app.inbox import service as inbox
from app.live import registry
from app.live.publish import BadgeEvent, badge_after_commit
from app.notify.service import notify
from app.queueing import EnqueueDeliveries, get_queue
from app.unitofwork import NOTHING, Dispatcher, Handoff, after_commit, commit, run_effects
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.redis_watch import user_event as user_channel
from tests.support.redisserver import RedisServer

# --- the dispatcher ------------------------------------------------------------------------------


def test_merged_effects_make_one_job_per_queue_and_channel_and_one_event_per_user(app, redis_watch, monkeypatch):
    monkeypatch.setitem(app.config, "DELIVERY_BATCH_SIZE", 3)  # not kept: a later test's 4 rows are one job
    batch = [
        Handoff([EnqueueDeliveries("default", "email", (1, 2)), BadgeEvent(frozenset({1}), "Shipped")]),
        Handoff([EnqueueDeliveries("default", "email", (3, 4)), EnqueueDeliveries("default", "push", (5,)),
                 BadgeEvent(frozenset({2}), "Shipped")]),
        Handoff([EnqueueDeliveries("high", "email", (6,))]),
    ]  # fmt: skip
    with app.app_context():
        run_effects(batch)
    events = [redis_watch.next_event(), redis_watch.next_event()]
    jobs = redis_watch.jobs()
    assert sorted(args for _, args in jobs["default"]) == [("email", [1, 2, 3]), ("email", [4]), ("push", [5])]
    assert [args for _, args in jobs["high"]] == [("email", [6])]
    assert sorted(channel for channel, _ in events) == [user_channel(1), user_channel(2)]
    assert {payload["toast"]["title"] for _, payload in events} == {"Shipped"}
    assert [dict(handoff.counts) for handoff in batch] == [
        {"enqueued": 2, "badges": 1},
        {"enqueued": 3, "badges": 1},
        {"enqueued": 1},
    ]


def test_hand_offs_that_pile_up_go_out_together(app, monkeypatch):
    rounds, first_round_started, release = [], threading.Event(), threading.Event()

    def slow_run(batch):
        rounds.append(len(batch))
        first_round_started.set()
        release.wait(5)

    monkeypatch.setattr(unitofwork, "run_effects", slow_run)
    dispatcher = Dispatcher(app)
    dispatcher.submit([EnqueueDeliveries("default", "email", (1,))])
    assert first_round_started.wait(5)
    for n in range(2, 12):  # while the thread is busy with the first
        dispatcher.submit([EnqueueDeliveries("default", "email", (n,))])
    release.set()
    assert dispatcher.wait_idle(5)
    assert rounds == [1, 10]


def test_a_failing_round_is_logged_and_the_thread_goes_on(app, monkeypatch, caplog):
    ran = []

    def flaky_run(batch):
        if not ran:
            ran.append("failed")
            raise RuntimeError("redis exploded")
        ran.extend(effect.ids[0] for handoff in batch for effect in handoff.effects)

    monkeypatch.setattr(unitofwork, "run_effects", flaky_run)
    dispatcher = Dispatcher(app)
    first = dispatcher.submit([EnqueueDeliveries("default", "email", (1,))])
    assert dispatcher.wait_idle(5) and first.wait(1) == {}
    dispatcher.submit([EnqueueDeliveries("default", "email", (2,))])
    assert dispatcher.wait_idle(5)
    assert ran == ["failed", 2]
    assert "post-commit hand-off of 1 commits failed" in caplog.text


def test_one_failing_kind_of_effect_does_not_stop_the_others(app, redis_watch, monkeypatch, caplog):
    monkeypatch.setattr("app.queueing.enqueue_deliveries", lambda *a: 1 / 0)
    handoff = Handoff([EnqueueDeliveries("default", "email", (1,)), BadgeEvent(frozenset({7}))])
    with app.app_context():
        run_effects([handoff])
    assert redis_watch.next_event() == (user_channel(7), {"kind": "badge"})
    assert dict(handoff.counts) == {"badges": 1} and "post-commit EnqueueDeliveries failed" in caplog.text


def test_committing_nothing_hands_nothing_over(app, monkeypatch):
    submitted = []
    monkeypatch.setattr(Dispatcher, "submit", lambda self, effects: submitted.append(effects))
    UserFactory()
    assert commit() is NOTHING
    badge_after_commit([])  # an empty event is no event
    assert commit() is NOTHING and submitted == []


def test_an_app_that_never_handed_anything_over_is_idle(app):
    assert unitofwork.wait_idle(app.__class__("untouched"))


def test_a_redis_outage_costs_only_the_effects_of_its_own_commits(app, tmp_path, monkeypatch):
    """Down: hand-offs finish at once with nothing counted (the sweeper and socket resyncs cover them).
    Restarted empty: the next commit's effects reach it, with no process restarted."""
    server = RedisServer(tmp_path / "redis")  # not started: Redis is down
    monkeypatch.setitem(app.config, "REDIS_URL", server.url)
    monkeypatch.setitem(app.config, "REALTIME_REDIS_URL", server.url)
    dispatcher = Dispatcher(app)
    try:
        down = dispatcher.submit([EnqueueDeliveries("default", "email", (1, 2)), BadgeEvent(frozenset({1}), "Hi")])
        assert dispatcher.wait_idle(10)
        assert dict(down.counts) == {}
        server.start()
        registry.register(server.client(), 1, "node-t", 8, 60, config=app.config)  # user 1 has a tab open
        up = dispatcher.submit([EnqueueDeliveries("default", "email", (3,)), BadgeEvent(frozenset({1}), "Hi")])
        assert dispatcher.wait_idle(10)
        assert dict(up.counts) == {"enqueued": 1, "badges": 1}
        with app.app_context():
            assert get_queue("default", server.client()).count == 1
    finally:
        server.stop()


def test_a_process_that_cannot_start_the_thread_still_answers(app, monkeypatch, caplog):
    def refuse(*args, **kwargs):
        raise RuntimeError("can't create new thread at interpreter shutdown")

    real_start = unitofwork.threading.Thread.start
    monkeypatch.setattr(unitofwork.threading.Thread, "start", refuse)
    dispatcher = Dispatcher(app)
    given_up = dispatcher.submit([EnqueueDeliveries("default", "email", (1,))])  # no exception: rows are committed
    assert dispatcher.wait_idle(0.1) and given_up.wait(0.1) == {}
    assert "post-commit hand-off skipped" in caplog.text
    ran = []
    monkeypatch.setattr(unitofwork.threading.Thread, "start", real_start)
    monkeypatch.setattr(unitofwork, "run_effects", lambda batch: ran.extend(batch))
    dispatcher.submit([EnqueueDeliveries("default", "email", (2,))])  # once threads start again, it runs
    assert dispatcher.wait_idle(5) and [h.effects[0].ids for h in ran] == [(2,)]


# --- the transaction side ------------------------------------------------------------------------


def test_effects_follow_the_commit_and_a_rollback_drops_them(app, redis_watch):
    badge_after_commit([1])  # before any statement: the transaction begins with the effect
    db.session.rollback()
    badge_after_commit([4])
    db.session.execute(sa.text("SELECT 1"))
    db.session.rollback()
    badge_after_commit([2])
    handoff = commit()
    assert handoff.wait(5) == {"badges": 1}
    assert redis_watch.next_event() == (user_channel(2), {"kind": "badge"})
    badge_after_commit([5])
    db.session.remove()  # a request that ends without committing
    marker(redis_watch)


def test_a_savepoint_rolled_back_drops_only_what_it_registered(app, redis_watch):
    badge_after_commit([1])
    with pytest.raises(RuntimeError):
        with db.session.begin_nested():
            badge_after_commit([2])
            raise RuntimeError("refused inside the savepoint")
    with db.session.begin_nested():
        badge_after_commit([3])
    commit().wait(5)
    heard = sorted(channel for channel, _ in (redis_watch.next_event(), redis_watch.next_event()))
    assert heard == [user_channel(1), user_channel(3)]
    marker(redis_watch)


# --- a unit of work on a connection of its own (on_connection) ------------------------------------

BACKEND_SQL = "SELECT pg_backend_pid(), txid_current()"


def _backend_through_session():
    return tuple(db.session.execute(sa.text(BACKEND_SQL)).one())


def _committed_user(**fields) -> int:
    """A committed member's id, with no session left open (so on_connection() starts a unit of its own)."""
    user_id = UserFactory(**fields).id
    db.session.commit()
    db.session.remove()
    return user_id


def _name_and_email(user_id: int) -> tuple[str, str]:
    row = db.session.execute(sa.text("SELECT display_name, email FROM users WHERE id = :id"), {"id": user_id}).one()
    return tuple(row)


@pytest.mark.committed
def test_a_unit_on_its_own_connection_is_one_transaction_with_the_session(app, redis_watch):
    """driversql's statements and the session's run on one backend in one transaction; commit() commits both,
    then hands over what either registered; the connection goes back to the pool."""
    user_id = _committed_user()
    pool = db.engine.pool
    with unitofwork.on_connection() as unit:
        assert unit is not None
        assert not db.session.registry.has()  # nothing so far made a session
        through_driver = driversql.fetchone(BACKEND_SQL, {})
        badge_after_commit([user_id])  # no session yet: registered on the unit
        assert not db.session.registry.has()
        through_session = _backend_through_session()  # the session joins the unit's transaction
        assert through_session == through_driver
        db.session.execute(sa.text("UPDATE users SET display_name = 'Renamed' WHERE id = :id"), {"id": user_id})
        badge_after_commit([user_id + 1])  # registered while the session holds the transaction
        driversql.fetchone("UPDATE users SET email = 'renamed@example.com' WHERE id = %(id)s", {"id": user_id})
        handoff = commit()
        assert handoff.wait(5) == {"badges": 2}
        assert pool.checkedout() == 1
    assert pool.checkedout() == 0
    heard = sorted(channel for channel, _ in (redis_watch.next_event(), redis_watch.next_event()))
    assert heard == [user_channel(user_id), user_channel(user_id + 1)]
    assert _name_and_email(user_id) == ("Renamed", "renamed@example.com")


@pytest.mark.committed
def test_a_unit_that_does_not_commit_leaves_nothing_and_hands_nothing_over(app, redis_watch):
    user_id = _committed_user(display_name="Before")
    with unitofwork.on_connection():
        driversql.fetchone("UPDATE users SET display_name = 'Lost' WHERE id = %(id)s", {"id": user_id})
        badge_after_commit([user_id])
        db.session.execute(sa.text("UPDATE users SET email = 'lost@example.com' WHERE id = :id"), {"id": user_id})
    assert db.engine.pool.checkedout() == 0
    name, email = _name_and_email(user_id)
    assert name == "Before" and email != "lost@example.com"
    marker(redis_watch)


@pytest.mark.committed
def test_a_rolled_back_unit_drops_its_work_and_effects_and_the_next_transaction_goes_on(app, redis_watch):
    user_id = _committed_user(display_name="Before")
    with unitofwork.on_connection():
        db.session.execute(sa.text("UPDATE users SET display_name = 'Lost' WHERE id = :id"), {"id": user_id})
        badge_after_commit([user_id])
        unitofwork.rollback()
        driversql.fetchone("UPDATE users SET email = 'kept@example.com' WHERE id = %(id)s", {"id": user_id})
        commit().wait(5)
    assert _name_and_email(user_id) == ("Before", "kept@example.com")
    marker(redis_watch)


@pytest.mark.committed
def test_a_savepoint_inside_a_unit_drops_only_what_it_registered(app, redis_watch):
    db.session.remove()
    with unitofwork.on_connection():
        badge_after_commit([1])
        with pytest.raises(RuntimeError):
            with db.session.begin_nested():
                badge_after_commit([2])
                raise RuntimeError("refused inside the savepoint")
        badge_after_commit([3])
        commit().wait(5)
    heard = sorted(channel for channel, _ in (redis_watch.next_event(), redis_watch.next_event()))
    assert heard == [user_channel(1), user_channel(3)]
    marker(redis_watch)


@pytest.mark.committed
def test_a_session_already_in_a_transaction_keeps_the_unit_in_it(app):
    """Two transactions would not be one unit of work: a block entered while the session reads runs in its
    transaction, as everywhere else."""
    db.session.remove()
    before = _backend_through_session()
    with unitofwork.on_connection() as unit:
        assert unit is None
        assert tuple(driversql.fetchone(BACKEND_SQL, {})) == before
        with unitofwork.on_connection() as inner:
            assert inner is None
    db.session.rollback()


# --- every producer: nothing reaches Redis unless its transaction commits -----------------------

MARKER_USER = 999_999_999


def marker(watch) -> None:
    """Commit a marker event and check it is the next thing Redis hears: nothing was sent before it."""
    after_commit(BadgeEvent(frozenset({MARKER_USER}), "marker"))
    commit().wait(5)
    assert watch.next_event() == (user_channel(MARKER_USER), {"kind": "badge", "toast": {"title": "marker"}})


def _comment_type():
    return NotificationTypeFactory(type="comment", default_email=True, priority="default")


def _online(user_id: int) -> None:
    """Give user_id an open tab (on a stand-in node), so that a badge event goes out for them."""
    registry.register(redis.realtime(), user_id, "producer-node", 8, 60)


def _ingest():
    _comment_type()
    _online(UserFactory(external_id="r1").id)
    return lambda: notify(["r1"], type_="comment", title="Hi", body="", dedupe_key=uuid.uuid4().hex)


def _mark_read():
    user = UserFactory()
    _online(user.id)
    row = NotificationFactory(user_id=user.id)
    return lambda: inbox.mark_read(user.id, row.id)


def _announcement():
    operator = UserFactory(role="operator")
    return lambda: announcements.create_announcement(operator, title="Maintenance", body="Sunday")


def _campaign_send():
    _comment_type()
    operator = UserFactory(role="operator")
    campaign = campaigns.create_campaign(operator, name="Spring", type_="comment", title="Sale", body="b")
    return lambda: campaigns.send_campaign(operator, campaign.id)


def _failed_delivery():
    row = NotificationFactory(user_id=UserFactory().id, type=_comment_type().type)
    return DeliveryFactory(notification_id=row.id, status="failed", error_kind="refused", provider="smtp")


def _dlq_replay():
    delivery = _failed_delivery()
    return lambda: dlq.replay_one(None, delivery.id)


def _dlq_bulk():
    _failed_delivery()
    return lambda: dlq.create_bulk(None, "replay", DlqFilters())


def _fanout_batch():
    _comment_type()
    users = [UserFactory() for _ in range(2)]
    _online(users[0].id)  # a tab open: its badge event goes out (the other's costs only the lookup)
    operator = UserFactory(role="operator")
    campaign = campaigns.create_campaign(operator, name="Spring", type_="comment", title="Sale", body="b")
    campaigns.send_campaign(operator, campaign.id)
    fanout.start(campaign.id)
    commit().wait(5)
    get_queue("low").empty()  # the fanout job the send enqueued: this test runs the batch itself
    return lambda: fanout.run_batch(campaign.id, 10)


def _bulk_batch():
    _failed_delivery()
    operation = dlq.create_bulk(None, "replay", DlqFilters())
    dlq.start_bulk(operation.id)
    commit().wait(5)
    get_queue("default").empty()  # the operation's own job: this test runs the batch itself
    return lambda: dlq.run_bulk_batch(operation.id, 100)


def _sweeper():
    row = NotificationFactory(user_id=UserFactory().id, type=_comment_type().type)
    DeliveryFactory(notification_id=row.id)
    db.session.execute(sa.text("UPDATE notification_deliveries SET updated_at = now() - interval '1 hour'"))
    return lambda: due.take_due(1, 100, ["high", "default", "low"])


PRODUCERS = {
    "api ingest": (_ingest, {"enqueued": 1, "badges": 1}),
    "inbox mark read": (_mark_read, {"badges": 1}),
    "live announcement": (_announcement, {"broadcasts": 1}),
    "campaign sent now": (_campaign_send, {"jobs": 1}),
    "dlq replay": (_dlq_replay, {"enqueued": 1}),
    "dlq bulk operation": (_dlq_bulk, {"jobs": 1}),
    "campaign fanout batch": (_fanout_batch, {"enqueued": 3, "badges": 1}),
    "dlq bulk batch": (_bulk_batch, {"enqueued": 1}),
    "sweeper": (_sweeper, {"enqueued": 1}),
}


@pytest.mark.parametrize("name", PRODUCERS)
def test_a_rolled_back_transaction_enqueues_and_publishes_nothing(app, redis_watch, name):
    setup, _ = PRODUCERS[name]
    produce = setup()
    commit().wait(5)
    produce()
    db.session.rollback()
    marker(redis_watch)
    assert redis_watch.jobs() == {"high": [], "default": [], "low": []}


@pytest.mark.parametrize("name", PRODUCERS)
def test_the_same_producer_committed_reaches_redis(app, redis_watch, name):
    setup, expected = PRODUCERS[name]
    produce = setup()
    commit().wait(5)
    produce()
    counts = commit().wait(5)
    assert dict(counts) == expected
    jobs = sum(len(queued) for queued in redis_watch.jobs().values())
    assert jobs >= (1 if set(expected) & {"enqueued", "jobs"} else 0)
