"""The fanout job: set-based batches, preferences resolved inline, idempotent, resumable, cancellable."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from rq.serializers import JSONSerializer

from app.campaigns import fanout, queries, service
from app.extensions import db
from app.models import Campaign
from app.queueing import fanout_job, get_queue
from jobs.fanout import fanout_campaign
from tests.campaigns.conftest import counts
from tests.factories import NotificationTypeFactory, PreferenceFactory
from tests.support.redis_watch import RedisWatch


@pytest.fixture
def small_batches(app, monkeypatch):
    monkeypatch.setitem(app.config, "FANOUT_BATCH_SIZE", 4)


def _rows(campaign_id: int) -> list:
    return list(
        db.session.execute(
            sa.text(
                "SELECT n.id, n.user_id, n.in_app, n.read_at IS NOT NULL AS born_read, n.dedupe_key, "
                "array_remove(array_agg(d.channel || ':' || d.status ORDER BY d.channel), NULL) AS deliveries "
                "FROM notifications n LEFT JOIN notification_deliveries d ON d.notification_id = n.id "
                "WHERE n.campaign_id = :id GROUP BY n.id, n.user_id ORDER BY n.user_id"
            ),
            {"id": campaign_id},
        )
    )


def _jobs(queue: str) -> list:
    q = get_queue(queue)
    return [q.fetch_job(job_id) for job_id in q.get_job_ids()]


def test_fanout_writes_every_row_in_batches_with_preferences_resolved_inline(
    small_batches, make_users, launch, promo, badges, operator
):
    ids = make_users(10)
    PreferenceFactory(user_id=ids[1], type=promo.type, channel="email", enabled=False)
    PreferenceFactory(user_id=ids[2], type=promo.type, channel="in_app", enabled=False)
    PreferenceFactory(user_id=ids[3], type=promo.type, channel="push", enabled=True)
    db.session.flush()
    campaign_id = launch()

    result = fanout_campaign(campaign_id)

    assert result["batches"] == 3 and result["users"] == 11 and result["created"] == 11  # 10 + the operator
    rows = {row.user_id: row for row in _rows(campaign_id)}
    assert set(rows) == {*ids, operator.id}
    assert {row.dedupe_key for row in rows.values()} == {f"campaign:{campaign_id}"}
    assert rows[ids[0]].deliveries == ["email:pending"] and rows[ids[0]].in_app and not rows[ids[0]].born_read
    assert rows[ids[1]].deliveries == []  # e-mail turned off
    # In-app off: the row is still written (it anchors the e-mail) but born read and hidden.
    assert not rows[ids[2]].in_app and rows[ids[2]].born_read and rows[ids[2]].deliveries == ["email:pending"]
    # Push on but no subscription: recorded as skipped with the reason, so the ledger says why.
    assert rows[ids[3]].deliveries == ["email:pending", "push:skipped"]
    campaign = queries.campaign(campaign_id)
    assert (campaign.status, campaign.done, campaign.total, campaign.cursor_user_id) == ("done", 11, 11, ids[-1])
    assert campaign.started_at is not None and campaign.finished_at is not None


def test_deliveries_are_enqueued_on_low_whatever_the_type_priority(make_users, launch, operator):
    urgent = NotificationTypeFactory(type="flash_sale", default_email=True, priority="high")
    make_users(3)
    campaign_id = launch(type_=urgent.type)

    fanout_campaign(campaign_id)

    low = _jobs("low")
    assert [job.args[0] for job in low] == ["email"]
    assert len(low[0].args[1]) == 4  # three users and the operator
    assert get_queue("high").count == 0 and get_queue("default").count == 0


def test_rerunning_the_job_creates_nothing_twice(small_batches, make_users, launch):
    make_users(8)
    campaign_id = launch()
    fanout_campaign(campaign_id)
    before, enqueued = counts(), get_queue("low").count

    again = fanout_campaign(campaign_id)

    assert again["users"] == 0 and counts() == before and get_queue("low").count == enqueued
    assert before == {"notifications": 9, "deliveries": 9}


def test_a_fanout_restarted_from_scratch_still_writes_each_row_once(small_batches, make_users, launch):
    make_users(5)
    campaign_id = launch()
    fanout_campaign(campaign_id)
    before = _rows(campaign_id)
    # Simulate a crash that lost the cursor: the dedupe key alone must stop duplicates.
    db.session.execute(
        sa.text("UPDATE campaigns SET status = 'running', cursor_user_id = 0, done = 0 WHERE id = :id"),
        {"id": campaign_id},
    )
    db.session.commit()

    result = fanout_campaign(campaign_id)

    assert result["users"] == 6 and result["created"] == 0 and result["email"] == 0
    assert _rows(campaign_id) == before


def test_a_stopped_fanout_resumes_from_its_cursor(small_batches, make_users, launch):
    ids = make_users(9)  # and the operator, first
    campaign_id = launch()
    assert fanout.start(campaign_id) is not None
    first = fanout.run_batch(campaign_id, 4)
    db.session.commit()  # the worker died after its first batch
    assert first.users == 4 and queries.campaign(campaign_id).cursor_user_id == ids[2]

    result = fanout_campaign(campaign_id)

    assert result["users"] == 6 and result["created"] == 6
    assert queries.campaign(campaign_id).done == 10 and len(_rows(campaign_id)) == 10


def test_cancel_mid_fanout_stops_after_the_current_batch(small_batches, make_users, launch, operator, monkeypatch):
    make_users(11)
    campaign_id = launch()
    real_run_batch = fanout.run_batch
    batches = []

    def cancel_after_first_batch(campaign_id, size):
        if len(batches) == 1:  # an operator clicks Cancel while the job runs, after its first batch
            service.cancel_campaign(operator, campaign_id)
            db.session.commit()
        batches.append(real_run_batch(campaign_id, size))
        return batches[-1]

    monkeypatch.setattr(fanout, "run_batch", cancel_after_first_batch)

    result = fanout_campaign(campaign_id)

    assert result["batches"] == 1 and result["users"] == 4
    campaign = queries.campaign(campaign_id)
    assert (campaign.status, campaign.done) == ("cancelled", 4)
    assert counts() == {"notifications": 4, "deliveries": 4}  # rows already written stay
    assert fanout_campaign(campaign_id)["users"] == 0  # a later run does nothing


def test_locale_and_list_audiences(make_users, launch, operator):
    english = make_users(3, prefix="en", locale="en-GB")
    make_users(2, prefix="ja", locale="ja")
    locale_id = launch(audience_kind="locale", audience_locale="EN")
    list_id = launch(name="List", audience_kind="list", list_file=b"external_id\nja-2\nnobody\nen-1\n")

    fanout_campaign(locale_id)
    fanout_campaign(list_id)

    assert sorted(r.user_id for r in _rows(locale_id)) == english
    listed = (
        db.session.execute(
            sa.text(
                "SELECT u.external_id FROM notifications n JOIN users u ON u.id = n.user_id "
                "WHERE n.campaign_id = :id ORDER BY 1"
            ),
            {"id": list_id},
        )
        .scalars()
        .all()
    )
    assert listed == ["en-1", "ja-2"]  # nothing for the unknown id
    assert queries.campaign(list_id).total == 2


def test_badges_go_only_to_users_with_a_live_socket(app, make_users, launch):
    ids = make_users(5)
    node = RedisWatch(users=[ids[0], ids[3]])  # the two with a tab open, on one web process
    try:
        campaign_id = launch()
        result = fanout_campaign(campaign_id)
        message = node.next_message()
        assert message["users"] == sorted([ids[0], ids[3]]) and result["badges"] == 2
        assert node.next_message(timeout=0.3) is None  # one message for the node, none for the three offline
    finally:
        node.close()


def test_an_error_marks_the_campaign_failed_and_resume_continues(
    small_batches, make_users, launch, operator, monkeypatch
):
    make_users(5)
    campaign_id = launch()
    real_run_batch = fanout.run_batch
    calls = []

    def flaky(campaign_id, size):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("database went away")
        return real_run_batch(campaign_id, size)

    monkeypatch.setattr(fanout, "run_batch", flaky)
    with pytest.raises(RuntimeError):
        fanout_campaign(campaign_id)
    campaign = queries.campaign(campaign_id)
    assert (campaign.status, campaign.done) == ("failed", 4) and "database went away" in campaign.error

    service.resume_campaign(operator, campaign_id)
    db.session.commit()
    fanout_campaign(campaign_id)

    campaign = queries.campaign(campaign_id)
    assert (campaign.status, campaign.done, campaign.error) == ("done", 6, None)
    assert counts()["notifications"] == 6


def test_scheduled_campaigns_start_when_due_and_lost_jobs_are_enqueued_again(make_users, operator, promo, app):
    make_users(2)
    due = service.create_campaign(operator, name="Due", type_=promo.type, title="t", body="b")
    later = service.create_campaign(operator, name="Later", type_=promo.type, title="t", body="b")
    db.session.flush()
    service.send_campaign(operator, due.id)
    service.send_campaign(operator, later.id, db.session.execute(sa.text("SELECT now() + interval '1 hour'")).scalar())
    db.session.commit()

    assert fanout.start_due() == 1
    assert get_queue("low").get_job_ids() == [fanout_job(due.id).job_id]
    assert fanout.start_due() == 1 and get_queue("low").count == 1  # already queued: not twice

    get_queue("low").empty()  # Redis lost the job
    assert fanout.start_due() == 1 and get_queue("low").count == 1
    # The not-yet-due campaign is not started even if a job runs for it early.
    assert fanout_campaign(later.id)["users"] == 0
    assert db.session.get(Campaign, later.id).status == "scheduled"


def test_the_sweeper_puts_lost_campaign_deliveries_back_on_low(make_users, launch, app, monkeypatch):
    from app.sweeper import sweep_once

    make_users(2)
    campaign_id = launch()
    fanout_campaign(campaign_id)
    get_queue("low").empty()  # the delivery jobs were lost
    db.session.execute(sa.text("UPDATE notification_deliveries SET updated_at = now() - interval '1 hour'"))
    db.session.commit()
    monkeypatch.setitem(app.config, "SWEEP_REQUEUE_AFTER_SECONDS", 1)

    result = sweep_once()

    assert result["enqueued"] == 3  # two users and the operator
    assert get_queue("default").count == 0 and [job.args[0] for job in _jobs("low")] == ["email"]


def test_the_fanout_job_round_trips_through_rq(make_users, launch, redis_client):
    from app.cli.worker import AppSimpleWorker

    make_users(2)
    campaign_id = launch()
    assert fanout_job(campaign_id).run()

    worker = AppSimpleWorker([get_queue("low", redis_client)], connection=redis_client, serializer=JSONSerializer)
    # Only the fanout job: the delivery jobs it enqueues stay queued (no provider in this test).
    worker.work(burst=True, max_jobs=1)

    assert queries.campaign(campaign_id).status == "done"
    assert counts() == {"notifications": 3, "deliveries": 3}


@pytest.mark.parametrize("mandatory, escalate_after", [(False, None), (True, None), (False, 3600)])
def test_the_fanout_writes_exactly_the_rows_the_ingest_writes(make_users, launch, operator, mandatory, escalate_after):
    from app.models import PushSubscription
    from app.notify.service import notify

    kind = NotificationTypeFactory(
        type="notice",
        default_in_app=True,
        default_email=True,
        default_push=False,
        mandatory=mandatory,
        escalate_after=escalate_after,
    )
    ids = make_users(6, prefix="eq")
    db.session.execute(sa.text("UPDATE users SET email = NULL WHERE id = :id"), {"id": ids[0]})
    db.session.add(PushSubscription(user_id=ids[1], endpoint="https://push.example/1", p256dh="k", auth="a"))
    for user_id, channel, enabled in [
        (ids[1], "push", True),
        (ids[2], "push", True),
        (ids[3], "email", False),
        (ids[4], "in_app", False),
        (ids[5], "email", False),
        (ids[5], "in_app", False),
    ]:
        PreferenceFactory(user_id=user_id, type=kind.type, channel=channel, enabled=enabled)
    db.session.flush()
    notify(ids, type_=kind.type, title="t", body="b", dedupe_key="ingest:1", by="user_id")
    listing = "\n".join(f"eq-{i}" for i in range(1, 7)).encode()
    campaign_id = launch(type_=kind.type, audience_kind="list", list_file=listing)

    fanout_campaign(campaign_id)

    shape = sa.text("""SELECT n.user_id, n.in_app, n.read_at IS NOT NULL AS born_read,
        array_remove(array_agg(d.channel || ':' || d.status || ':' || coalesce(d.skip_reason, '') || ':'
                               || coalesce(d.escalation, '') || ':' || (d.next_attempt_at > now() + interval '1 minute')
                               ORDER BY d.channel), NULL)
        FROM notifications n LEFT JOIN notification_deliveries d ON d.notification_id = n.id
        WHERE n.dedupe_key = :key GROUP BY n.id, n.user_id ORDER BY n.user_id""")
    ingest = db.session.execute(shape, {"key": "ingest:1"}).all()
    assert db.session.execute(shape, {"key": f"campaign:{campaign_id}"}).all() == ingest
    assert len({(row[1], row[2], tuple(row[3])) for row in ingest}) >= (2 if mandatory else 5)  # cases differ
