"""Digests end to end below the sweeper: due runs opened set-based, one e-mail per user and period,
read items left out, suppression and quiet hours, exactly once, caps → 'digested', DST and Tokyo."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, time, timedelta

import pytest
import sqlalchemy as sa

from app.digests import service
from app.digests.sweep import open_due
from app.extensions import db
from app.models import DigestPreference, DigestTemplate, EmailSuppression
from jobs.delivery import deliver_batch
from jobs.digest import send_digests
from tests.digests.conftest import runs
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.delivery import reload

# Opening runs, the send job and the engine commit.
pytestmark = pytest.mark.committed

NOW = datetime(2026, 6, 10, 12, 0, 30, tzinfo=UTC)  # half a minute after the hour


def run_ids() -> list[int]:
    return [row[0] for row in db.session.execute(sa.text("SELECT id FROM digest_runs ORDER BY id"))]


def test_email_of_a_digest_type_waits_for_the_digest_but_mandatory_goes_at_once(app, fake_provider, make_delivery):
    hourly = NotificationTypeFactory(type="like", default_email=True, email_frequency="hourly")
    mandatory = NotificationTypeFactory(type="security", default_email=True, mandatory=True, email_frequency="daily")
    user = UserFactory()
    db.session.add(DigestPreference(user_id=user.id, type="security", frequency="hourly"))  # ignored: mandatory
    waiting, urgent = make_delivery(user=user, type_=hourly), make_delivery(user=user, type_=mandatory)

    deliver_batch("email", [waiting.id, urgent.id])

    assert (reload(waiting).status, reload(waiting).skip_reason) == ("skipped", "digested")
    assert (reload(urgent).status, reload(urgent).skip_reason) == ("sent", None)
    assert [m.subject for m in fake_provider.sent] == ["Hello"]


def test_one_email_per_user_grouped_by_type_with_counts_and_links(app, fake_provider, hourly_type, daily_type,
                                                                  waiting):  # fmt: skip
    user, other = UserFactory(display_name="Ann"), UserFactory()
    comment = NotificationTypeFactory(type="comment", label="Comments", default_email=True)
    db.session.add(DigestPreference(user_id=user.id, type="comment", frequency="hourly"))  # the user's choice
    earlier = NOW - timedelta(minutes=20)
    waiting(user, hourly_type, earlier, title="Alice liked your post", link_path="/posts/1")
    waiting(user, hourly_type, earlier, title="Bob liked your post", link_path="/posts/1")
    waiting(user, comment, earlier, title="Carol commented")
    waiting(other, hourly_type, earlier)
    waiting(user, hourly_type, NOW - timedelta(seconds=10), title="Too late")  # after the period began: next one

    assert open_due(NOW, app.config) == {"opened": 2, "taken": 4}
    counts = send_digests(run_ids())

    assert counts == {"claimed": 2, "sent": 2}
    mine = next(m for m in fake_provider.sent if m.to == user.email)
    assert mine.subject == "Your hourly digest: 3 new notifications"
    assert "Comments (1)" in mine.text and "Likes (2)" in mine.text
    assert "- Alice liked your post http://127.0.0.1:5000/posts/1" in mine.text.replace(
        app.config["BASE_URL"], "http://127.0.0.1:5000"
    )
    assert "Too late" not in mine.text
    assert '<a href="' + app.config["BASE_URL"] + '/posts/1">Bob liked your post</a>' in mine.html
    assert [r[3:] for r in runs()] == [("sent", 3), ("sent", 1)]


def test_read_items_are_left_out_and_nothing_left_sends_nothing(app, fake_provider, hourly_type, waiting):
    reader, partly = UserFactory(), UserFactory()
    earlier = NOW - timedelta(minutes=5)
    waiting(reader, hourly_type, earlier, read=True)
    waiting(partly, hourly_type, earlier, title="Read one", read=True)
    waiting(partly, hourly_type, earlier, title="Unread one")
    open_due(NOW, app.config)

    send_digests(run_ids())

    assert [m.to for m in fake_provider.sent] == [partly.email]
    assert "Unread one" in fake_provider.sent[0].text and "Read one" not in fake_provider.sent[0].text
    assert sorted(r[3] for r in runs()) == ["empty", "sent"]


def test_nothing_waiting_opens_no_run(app, fake_provider, hourly_type, waiting):
    waiting(UserFactory(), hourly_type, NOW)  # arrived in the current period
    assert open_due(NOW, app.config) == {"opened": 0, "taken": 0}
    assert runs() == []


def test_suppressed_address_gets_no_digest_and_quiet_hours_defer_it(app, fake_provider, hourly_type, waiting):
    now = datetime.now(UTC)
    suppressed = UserFactory(email="gone@example.com")
    db.session.add(EmailSuppression(address="gone@example.com", reason="bounce"))
    # Quiet hours around the present moment (in UTC): the digest waits until they end.
    start, end = (now - timedelta(hours=1)).time().replace(second=0, microsecond=0), (now + timedelta(hours=1)).time()
    quiet = UserFactory(timezone="UTC", quiet_hours_start=start, quiet_hours_end=end.replace(second=0, microsecond=0))
    waiting(suppressed, hourly_type, now - timedelta(hours=2))
    waiting(quiet, hourly_type, now - timedelta(hours=2))
    db.session.commit()
    open_due(now, app.config)

    assert send_digests(run_ids()) == {"claimed": 2, "skipped": 1, "deferred": 1}

    assert fake_provider.sent == []
    by_user = {r[0]: r[3] for r in runs()}
    assert by_user == {suppressed.id: "skipped", quiet.id: "pending"}
    wake = db.session.execute(sa.text("SELECT next_attempt_at FROM digest_runs WHERE user_id = :u"), {"u": quiet.id})
    assert wake.scalar() > now + timedelta(minutes=50)  # the end of the quiet hours
    assert service.take_due(30, 100) == []  # not handed to a job before then


def test_two_sweepers_at_once_open_each_run_once_and_a_retried_job_sends_once(app, fake_provider, hourly_type,
                                                                            waiting):  # fmt: skip
    users = [UserFactory() for _ in range(30)]
    for user in users:
        for i in range(3):
            waiting(user, hourly_type, NOW - timedelta(minutes=30 + i))
    db.session.commit()
    config = {**app.config, "DIGEST_BATCH_SIZE": 7}  # many small batches, interleaved between the two
    barrier, errors, results = threading.Barrier(2), [], []

    def sweeper():
        try:
            with app.app_context():
                barrier.wait()
                results.append(open_due(NOW, config))
                db.session.remove()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=sweeper) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert errors == []
    assert sum(r["taken"] for r in results) == 90
    assert len(runs()) == 30 and {r[0] for r in runs()} == {u.id for u in users}
    once = db.session.execute(
        sa.text("SELECT count(*), count(DISTINCT digest_id) FROM notification_deliveries WHERE digest_id IS NOT NULL")
    ).one()
    assert tuple(once) == (90, 30)
    ids = run_ids()
    send_digests(ids)
    send_digests(ids)  # the same job again (RQ retry, or the sweeper's re-enqueue): nothing left to claim
    assert len(fake_provider.sent) == 30 and len({m.to for m in fake_provider.sent}) == 30
    assert open_due(NOW, app.config)["opened"] == 0  # a restarted sweeper in the same period: no second run


def test_a_worker_killed_mid_digest_leaves_a_lease_the_sweeper_hands_on(app, fake_provider, hourly_type, waiting):
    user = UserFactory()
    waiting(user, hourly_type, NOW - timedelta(minutes=30))
    open_due(NOW, app.config)
    [run_id] = run_ids()
    assert service.claim([run_id], 60)  # a worker claimed it, then died
    db.session.execute(sa.text("UPDATE digest_runs SET locked_until = now() - interval '1 second'"))
    db.session.commit()

    assert service.take_due(30, 100) == [run_id]
    db.session.commit()
    send_digests([run_id])

    assert len(fake_provider.sent) == 1 and runs()[0][3] == "sent"
    message_id_source = db.session.execute(sa.text("SELECT ledger_id FROM digest_runs")).scalar()
    assert fake_provider.sent[0].delivery_id == message_id_source  # the same Message-ID on any resend


def test_cap_excess_goes_to_the_next_hourly_digest(app, fake_provider, make_delivery):
    capped = NotificationTypeFactory(type="mention", label="Mentions", default_email=True, cap_count=1,
                                     cap_window=3600)  # fmt: skip
    user = UserFactory()
    first, second = make_delivery(user=user, type_=capped, title="First"), make_delivery(user=user, type_=capped,
                                                                                         title="Second")  # fmt: skip
    deliver_batch("email", [first.id, second.id])
    assert [(reload(d).status, reload(d).skip_reason) for d in (first, second)] == [
        ("sent", None),
        ("skipped", "digested"),
    ]
    fake_provider.sent.clear()
    next_hour = datetime.now(UTC).replace(minute=0, second=30, microsecond=0) + timedelta(hours=1)

    open_due(next_hour, app.config)
    send_digests(run_ids())

    assert [r[1] for r in runs()] == ["hourly"]
    assert len(fake_provider.sent) == 1 and "Second" in fake_provider.sent[0].text


@pytest.mark.parametrize(
    ("zone", "nine_local_utc", "day_before_utc"),
    [
        # 8 March 2026: New York springs forward (EST → EDT), 09:00 EDT is 13:00 UTC; the day before 14:00 UTC.
        ("America/New_York", datetime(2026, 3, 8, 13, 0, tzinfo=UTC), datetime(2026, 3, 7, 14, 0, tzinfo=UTC)),
        # 1 November 2026: it falls back (EDT → EST), 09:00 EST is 14:00 UTC; the day before 13:00 UTC.
        ("America/New_York", datetime(2026, 11, 1, 14, 0, tzinfo=UTC), datetime(2026, 10, 31, 13, 0, tzinfo=UTC)),
        ("Asia/Tokyo", datetime(2026, 3, 8, 0, 0, tzinfo=UTC), datetime(2026, 3, 7, 0, 0, tzinfo=UTC)),
    ],
)
def test_daily_digest_at_nine_local_across_dst_and_in_tokyo(app, fake_provider, daily_type, waiting, zone,
                                                            nine_local_utc, day_before_utc):  # fmt: skip
    user = UserFactory(timezone=zone)
    waiting(user, daily_type, day_before_utc + timedelta(hours=3))  # arrived after yesterday's digest
    db.session.commit()

    # A minute before 09:00 local the period is still yesterday's, which began before the item: nothing due.
    assert open_due(nine_local_utc - timedelta(minutes=1), app.config)["opened"] == 0
    # The old offset's 09:00 (an hour off either way) is not 09:00 local either.
    wrong = nine_local_utc + (timedelta(hours=-1) if nine_local_utc.month == 11 else timedelta(hours=1))
    if zone != "Asia/Tokyo" and wrong < nine_local_utc:
        assert open_due(wrong, app.config)["opened"] == 0
    assert open_due(nine_local_utc + timedelta(seconds=20), app.config) == {"opened": 1, "taken": 1}

    assert runs() == [(user.id, "daily", nine_local_utc, "pending", 0)]
    send_digests(run_ids())
    assert len(fake_provider.sent) == 1 and fake_provider.sent[0].subject.startswith("Your daily digest")


def test_daily_digest_at_the_users_chosen_time(app, fake_provider, daily_type, waiting):
    user = UserFactory(timezone="Europe/Berlin", digest_time=time(18, 30))
    waiting(user, daily_type, datetime(2026, 6, 10, 8, 0, tzinfo=UTC))
    db.session.commit()
    # 18:30 CEST is 16:30 UTC.
    assert open_due(datetime(2026, 6, 10, 16, 29, tzinfo=UTC), app.config)["opened"] == 0
    assert open_due(datetime(2026, 6, 10, 16, 30, 5, tzinfo=UTC), app.config)["opened"] == 1
    assert runs()[0][2] == datetime(2026, 6, 10, 16, 30, tzinfo=UTC)


def test_a_digest_uses_the_template_of_the_users_locale_chain(app, fake_provider, hourly_type, waiting):
    db.session.add(DigestTemplate(locale="ja", subject="{{ total }} 件の未読", body_text="{{ groups[0].label }}"))
    japanese, english = UserFactory(locale="ja-JP"), UserFactory(locale="en")
    for user in (japanese, english):
        waiting(user, hourly_type, NOW - timedelta(minutes=5))
    open_due(NOW, app.config)

    send_digests(run_ids())

    subjects = {m.to: m.subject for m in fake_provider.sent}
    assert subjects == {japanese.email: "1 件の未読", english.email: "Your hourly digest: 1 new notification"}
    assert next(m for m in fake_provider.sent if m.to == japanese.email).html  # the built-in HTML part filled in


def test_the_sweeper_step_opens_due_runs_and_enqueues_their_job(app, hourly_type, waiting):
    from app.digests.sweep import sweep
    from app.queueing import DIGEST_JOB, DIGEST_QUEUE, get_queue

    users = [UserFactory() for _ in range(3)]
    for user in users:
        waiting(user, hourly_type, datetime.now(UTC) - timedelta(hours=2))
    db.session.commit()

    result = sweep(app.config, datetime.now(UTC))

    assert result == {"opened": 3, "taken": 3, "enqueued": 3}
    [job] = get_queue(DIGEST_QUEUE).get_jobs()
    assert job.func_name == DIGEST_JOB and sorted(job.args[0]) == run_ids()
    assert sweep(app.config, datetime.now(UTC))["enqueued"] == 0  # its job is waiting: not enqueued twice


def test_a_digest_carries_one_click_unsubscribe_that_stops_that_kind_of_digest(app, fake_provider, hourly_type,
                                                                               daily_type, waiting):  # fmt: skip
    user = UserFactory()
    earlier = NOW - timedelta(minutes=20)
    waiting(user, hourly_type, earlier)
    db.session.commit()
    open_due(NOW, app.config)
    send_digests(run_ids())

    [mail] = fake_provider.sent
    assert mail.headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    link = mail.headers["List-Unsubscribe"][1:-1]
    path = link.removeprefix(app.config["BASE_URL"])
    client = app.test_client()
    assert "hourly digest" in client.get(path).get_data(as_text=True)

    answer = client.post(path)  # what a mail client sends for the user: no cookie, no CSRF token

    assert answer.status_code == 200
    db.session.rollback()
    prefs = db.session.execute(
        sa.text("SELECT type, channel, enabled FROM notification_preferences WHERE user_id = :u"), {"u": user.id}
    ).all()
    assert [tuple(p) for p in prefs] == [("like", "email", False)]  # the daily type's e-mail is left alone
