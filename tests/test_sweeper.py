"""The sweeper: expired leases back to pending, due rows enqueued once, old idempotency keys pruned."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.delivery.due import take_due
from app.extensions import db, redis
from app.queueing import get_queue
from app.sweeper import TRY_LOCK_SQL, UNLOCK_SQL, leadership, sweep_once
from tests.factories import NotificationTypeFactory
from tests.support.delivery import reload


def set_row(delivery, sql: str):
    db.session.execute(sa.text(f"UPDATE notification_deliveries SET {sql} WHERE id = :id"), {"id": delivery.id})


def queued(name: str) -> list[tuple]:
    return [tuple(job.args) for job in get_queue(name).get_jobs()]


def test_expired_lease_returns_to_pending_counting_an_attempt(app, make_delivery):
    dead = make_delivery(status="sending")
    set_row(dead, "locked_until = now() - interval '1 second'")
    alive = make_delivery(status="sending")
    set_row(alive, "locked_until = now() + interval '1 minute'")

    assert sweep_once()["released"] == 1

    row = reload(dead)
    assert (row.status, row.locked_until, row.attempts) == (
        "pending",
        None,
        1,
    )  # a poison message must not loop forever
    assert row.next_attempt_at > row.updated_at  # due a second later, so the next pass enqueues it
    assert reload(alive).status == "sending"


def test_due_rows_are_enqueued_once_on_their_types_priority_queue(app, make_delivery):
    urgent = NotificationTypeFactory(type="otp", default_email=True, priority="high")
    retry = make_delivery()
    set_row(retry, "updated_at = now() - interval '10 seconds', next_attempt_at = now() - interval '1 second'")
    lost = make_delivery(type_=urgent)  # enqueued long ago; Redis lost the job
    set_row(lost, "updated_at = now() - interval '10 minutes', next_attempt_at = now() - interval '10 minutes'")
    fresh = make_delivery()  # just created by the API, which enqueues it itself
    future = make_delivery()
    set_row(future, "updated_at = now() - interval '10 seconds', next_attempt_at = now() + interval '1 hour'")

    first = sweep_once()

    assert (first["due"], first["enqueued"]) == (2, 2)
    assert queued("default") == [("email", [retry.id])]
    assert queued("high") == [("email", [lost.id])]
    assert sweep_once()["due"] == 0  # stamped: a second pass (or a second sweeper) takes nothing
    assert len(get_queue("default")) == 1
    assert fresh.id and future.id


def test_due_rows_of_two_types_of_one_priority_share_a_queue_in_order_and_a_campaigns_go_on_low(app, make_delivery):
    other = NotificationTypeFactory(type="reminder", default_email=True, priority="default")
    rows = [make_delivery(type_=other if i % 2 else None) for i in range(4)]
    campaign_id = db.session.execute(
        sa.text("INSERT INTO campaigns (name, type, title, body, status) "
                "VALUES ('Spring', 'comment', 'T', 'B', 'done') RETURNING id")
    ).scalar_one()  # fmt: skip
    from_campaign = make_delivery()
    db.session.execute(
        sa.text("UPDATE notifications SET campaign_id = :c WHERE id = :id"),
        {"c": campaign_id, "id": from_campaign.notification_id},
    )
    for row in [*rows, from_campaign]:
        set_row(row, "updated_at = now() - interval '10 seconds', next_attempt_at = now() - interval '1 second'")

    due = take_due(300, 100, ["high", "default", "low"])

    assert due == {("default", "email"): sorted(r.id for r in rows), ("low", "email"): [from_campaign.id]}


def test_due_rows_are_batched(app, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "DELIVERY_BATCH_SIZE", 2)
    rows = [make_delivery() for _ in range(5)]
    for row in rows:
        set_row(row, "updated_at = now() - interval '1 hour'")

    sweep_once()

    assert sorted(len(ids) for _, ids in queued("default")) == [1, 2, 2]


def test_another_sweepers_pass_makes_this_one_skip_its_turn(app, make_delivery):
    row = make_delivery()
    set_row(row, "updated_at = now() - interval '1 hour'")

    with db.engine.engine.connect() as other:  # another sweeper mid-pass: its own session holds the lock
        assert other.execute(TRY_LOCK_SQL).scalar_one()
        assert sweep_once() == {"locked": True}
        assert reload(row).updated_at < db.session.execute(sa.text("SELECT now()")).scalar_one()
        assert queued("default") == []
        other.execute(UNLOCK_SQL)

    assert sweep_once()["due"] == 1  # the lock is free again once that pass ends


def test_the_lock_is_released_after_each_pass_and_needs_no_redis(app, monkeypatch):
    def no_redis(*args, **kwargs):
        raise AssertionError("the sweeper lock must not touch Redis")

    with monkeypatch.context() as patch:
        patch.setattr(redis, "client", no_redis)
        with leadership() as leader, leadership() as second:
            assert (leader, second) == (True, False)

    with db.engine.engine.connect() as other:
        assert other.execute(TRY_LOCK_SQL).scalar_one()  # nobody holds it between passes
        other.execute(UNLOCK_SQL)


def test_a_failing_pass_still_gives_the_lock_up(app, monkeypatch):
    import app.sweeper as sweeper

    def broken(config):
        raise RuntimeError("a step failed")

    monkeypatch.setattr(sweeper, "_pass", broken)
    with pytest.raises(RuntimeError):
        sweep_once()
    with leadership() as leader:
        assert leader


def test_old_idempotency_keys_are_pruned(app):
    db.session.execute(sa.text("INSERT INTO api_keys (name, prefix, key_hash) VALUES ('k', 'p', 'h')"))
    key_id = db.session.execute(sa.text("SELECT id FROM api_keys")).scalar_one()
    for key, age in (("old", "25 hours"), ("new", "1 hour")):
        db.session.execute(
            sa.text(
                "INSERT INTO idempotency_keys (api_key_id, key, method, path, request_hash, created_at) "
                f"VALUES (:k, :key, 'POST', '/v1/notifications', 'x', now() - interval '{age}')"
            ),
            {"k": key_id, "key": key},
        )

    assert sweep_once()["pruned"] == 1
    assert db.session.execute(sa.text("SELECT key FROM idempotency_keys")).scalars().all() == ["new"]


def test_sweep_command_runs_once(app, make_delivery):
    row = make_delivery()
    row_id = row.id
    set_row(row, "updated_at = now() - interval '1 hour'")

    result = app.test_cli_runner().invoke(args=["sweep", "--once"])

    assert result.exit_code == 0, result.output
    assert queued("default") == [("email", [row_id])]


def test_stale_rows_wait_while_their_queue_has_a_backlog(app, make_delivery):
    from app.queueing import enqueue_deliveries
    from app.sweeper import IDLE_QUEUE_JOBS

    backlog = make_delivery()  # enqueued an hour ago by the API, never touched since
    set_row(backlog, "updated_at = now() - interval '1 hour', next_attempt_at = now() - interval '1 hour'")
    retry = make_delivery()
    set_row(retry, "updated_at = now() - interval '10 seconds', next_attempt_at = now() - interval '1 second'")
    for n in range(IDLE_QUEUE_JOBS + 1):
        enqueue_deliveries("default", "email", [100000 + n])

    result = sweep_once()

    # The retry is certainly not queued; the stale row most likely still is, behind the backlog.
    assert result["due"] == 1
    assert queued("default")[-1] == ("email", [retry.id])


def test_a_backlog_is_walked_once_and_a_row_behind_the_cursor_waits_for_the_walk_to_start_over(
    app, make_delivery, monkeypatch
):
    monkeypatch.setitem(app.config, "SWEEP_LIMIT", 2)
    monkeypatch.setitem(app.config, "SWEEP_DUE_PASSES", 1)  # one pass per sweep, to see where each walk starts
    rows = [make_delivery() for _ in range(5)]
    for n, row in enumerate(rows):  # due one after another, each untouched since it fell due
        set_row(row, f"updated_at = now() - interval '1 hour', next_attempt_at = now() - interval '{50 - n} minutes'")

    def taken() -> list[int]:
        return sorted(i for _, ids in queued("default") for i in ids)

    assert sweep_once()["due"] == 2  # a full pass: the next walk starts at its last row
    late = make_delivery()  # fell due before the cursor (say, a retry whose transaction committed late)
    set_row(late, "updated_at = now() - interval '2 hours', next_attempt_at = now() - interval '1 hour'")
    assert sweep_once()["due"] == 2 and taken() == sorted(r.id for r in rows[:4])
    assert sweep_once()["due"] == 1  # the last one ahead of the cursor: not a full pass, so the walk starts over
    assert sweep_once()["due"] == 1 and taken() == sorted([*(r.id for r in rows), late.id])  # the late row
    assert sweep_once()["due"] == 0  # every row once


def test_a_backlog_is_drained_within_one_sweep_up_to_its_passes(app, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "SWEEP_LIMIT", 2)
    monkeypatch.setitem(app.config, "SWEEP_DUE_PASSES", 3)
    rows = [make_delivery() for _ in range(7)]
    for n, row in enumerate(rows):
        set_row(row, f"updated_at = now() - interval '1 hour', next_attempt_at = now() - interval '{50 - n} minutes'")

    first = sweep_once()  # three full passes of two, each committed; every job in Redis when it returns

    assert (first["due"], first["enqueued"]) == (6, 6)
    assert sorted(i for _, ids in queued("default") for i in ids) == sorted(r.id for r in rows[:6])
    assert (sweep_once()["due"], sweep_once()["due"]) == (1, 0)  # the rest at the next sweep, then nothing
    assert sorted(i for _, ids in queued("default") for i in ids) == sorted(r.id for r in rows)
