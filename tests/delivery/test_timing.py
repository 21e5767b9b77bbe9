"""Per-type timing at send time: escalation (read / seen), online routing, frequency caps."""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.extensions import db, redis
from app.inbox import service as inbox
from app.live import presence
from app.models import NotificationDelivery
from app.notify.service import notify
from jobs.delivery import deliver_batch
from tests.factories import NotificationTypeFactory, PreferenceFactory, UserFactory
from tests.support.delivery import reload

# The engine commits (claim, skips) and records sends on its own autocommit connection.
pytestmark = pytest.mark.committed

PAST = datetime.now(UTC) - timedelta(seconds=5)


def escalating(unless="read", **fields):
    return NotificationTypeFactory(
        type=f"esc_{unless}", default_email=True, escalate_after=60, escalate_unless=unless, **fields
    )


def statuses(*deliveries):
    return [(reload(d).status, reload(d).skip_reason) for d in deliveries]


# --- escalation ----------------------------------------------------------------------------------------


def test_ingest_makes_escalations_wait_and_enqueues_nothing(app):
    type_ = escalating()
    user = UserFactory(external_id="ada", email="ada@example.com")

    result = notify(["ada"], type_=type_.type, title="Hi", body="b", dedupe_key="e1")
    db.session.commit()

    assert result.pending == {"email": [], "push": [], "sms": [], "chat": []}  # the sweeper enqueues them when due
    delivery = db.session.scalars(sa.select(NotificationDelivery)).one()
    assert (delivery.status, delivery.escalation) == ("pending", "read")
    wait = (delivery.next_attempt_at - delivery.created_at).total_seconds()
    assert 59 <= wait <= 61
    assert deliver_batch("email", [delivery.id]) == {"claimed": 0}  # not due: nothing is sent early
    assert user.id and reload(delivery).status == "pending"


def test_ingest_without_escalation_keeps_sending_at_once(app):
    NotificationTypeFactory(type="plain", default_email=True)
    UserFactory(external_id="bob", email="bob@example.com")

    result = notify(["bob"], type_="plain", title="Hi", body="b", dedupe_key="p1")

    [delivery] = db.session.scalars(sa.select(NotificationDelivery)).all()
    assert result.pending["email"] == [delivery.id] and delivery.escalation is None


def test_escalation_sent_when_still_unread(app, fake_provider, make_delivery):
    delivery = make_delivery(type_=escalating(), escalation="read", next_attempt_at=PAST)

    assert deliver_batch("email", [delivery.id])["sent"] == 1
    assert len(fake_provider.sent) == 1 and reload(delivery).status == "sent"


def test_escalation_skipped_when_read(app, fake_provider, make_delivery):
    delivery = make_delivery(type_=escalating(), escalation="read", next_attempt_at=PAST)
    db.session.execute(sa.text("UPDATE notifications SET read_at = now()"))

    assert deliver_batch("email", [delivery.id])["skipped"] == 1
    assert statuses(delivery) == [("skipped", "read")] and fake_provider.sent == []


def test_seen_escalation_skipped_when_seen_but_read_escalation_is_not(app, fake_provider, make_delivery):
    user = UserFactory()
    unseen = make_delivery(user=user, type_=escalating("seen"), escalation="seen", next_attempt_at=PAST)
    unread = make_delivery(user=user, type_=escalating("read"), escalation="read", next_attempt_at=PAST)
    db.session.execute(
        sa.text("INSERT INTO notification_last_seen (user_id, seen_at) VALUES (:u, now() + interval '1 second')"),
        {"u": user.id},
    )

    deliver_batch("email", [unseen.id, unread.id])

    assert statuses(unseen, unread) == [("skipped", "seen"), ("sent", None)]
    assert len(fake_provider.sent) == 1


def test_seen_escalation_sent_when_the_row_is_newer_than_last_seen(app, fake_provider, make_delivery):
    user = UserFactory()
    db.session.execute(
        sa.text("INSERT INTO notification_last_seen (user_id, seen_at) VALUES (:u, now() - interval '1 hour')"),
        {"u": user.id},
    )
    delivery = make_delivery(user=user, type_=escalating("seen"), escalation="seen", next_attempt_at=PAST)

    deliver_batch("email", [delivery.id])

    assert statuses(delivery) == [("sent", None)]


def test_mandatory_escalation_ignores_the_preference(app, fake_provider, make_delivery):
    type_ = escalating(mandatory=True)
    user = UserFactory()
    PreferenceFactory(user_id=user.id, type=type_.type, channel="email", enabled=False)
    delivery = make_delivery(user=user, type_=type_, escalation="read", next_attempt_at=PAST)

    deliver_batch("email", [delivery.id])

    assert statuses(delivery) == [("sent", None)]


def test_marking_read_skips_pending_escalations_at_once(app, make_delivery):
    user = UserFactory()
    type_ = escalating()
    email = make_delivery(user=user, type_=type_, escalation="read")
    push = make_delivery(user=user, type_=type_, channel="push", escalation="read")
    push.notification_id = email.notification_id  # both channels of one notification
    other = make_delivery(user=user, type_=type_, escalation="read")
    plain = make_delivery(user=user)  # not an escalation: reading does not touch it
    stranger = make_delivery(type_=type_, escalation="read")
    db.session.flush()

    assert inbox.mark_read(user.id, email.notification_id) == 1
    assert inbox.mark_read(user.id, stranger.notification_id) == 0  # another user's row: nothing
    db.session.commit()
    assert statuses(email, push, other, plain, stranger) == [
        ("skipped", "read"),
        ("skipped", "read"),
        ("pending", None),
        ("pending", None),
        ("pending", None),
    ]

    inbox.read_all(user.id)
    db.session.commit()
    assert statuses(other, plain, stranger) == [("skipped", "read"), ("pending", None), ("pending", None)]


# --- online routing ------------------------------------------------------------------------------------


def test_online_user_gets_no_email_for_online_routed_type(app, fake_provider, make_delivery):
    routed = NotificationTypeFactory(type="chat", default_email=True, skip_when_online=True)
    online, offline = UserFactory(), UserFactory()
    presence.touch(redis.client(), [online.id], ttl=60)
    skipped = make_delivery(user=online, type_=routed)
    sent = make_delivery(user=offline, type_=routed)
    unrouted = make_delivery(user=online)  # a type without skip_when_online still e-mails online users

    deliver_batch("email", [skipped.id, sent.id, unrouted.id])

    assert statuses(skipped, sent, unrouted) == [("skipped", "online"), ("sent", None), ("sent", None)]
    assert len(fake_provider.sent) == 2


def test_online_routing_ages_out_with_the_heartbeat(app, fake_provider, make_delivery):
    routed = NotificationTypeFactory(type="chat", default_email=True, skip_when_online=True)
    user = UserFactory()
    presence.touch(redis.client(), [user.id], ttl=60, now=time.time() - 120)  # a socket closed long ago
    delivery = make_delivery(user=user, type_=routed)

    deliver_batch("email", [delivery.id])

    assert statuses(delivery) == [("sent", None)]


# --- frequency caps ------------------------------------------------------------------------------------


def capped(count=2, window=3600):
    return NotificationTypeFactory(type="digest", default_email=True, default_push=True, cap_count=count,
                                   cap_window=window)  # fmt: skip


def test_cap_skips_the_excess_per_user_type_and_channel(app, fake_provider, make_delivery):
    type_ = capped(2)
    user, other = UserFactory(), UserFactory()
    mine = [make_delivery(user=user, type_=type_) for _ in range(3)]
    theirs = make_delivery(user=other, type_=type_)
    uncapped = make_delivery(user=user)

    deliver_batch("email", [d.id for d in [*mine, theirs, uncapped]])

    assert statuses(*mine, theirs, uncapped) == [
        ("sent", None),
        ("sent", None),
        ("skipped", "digested"),  # e-mail over the cap waits for the user's next digest (issue 16)
        ("sent", None),
        ("sent", None),
    ]
    later = make_delivery(user=user, type_=type_)
    deliver_batch("email", [later.id])
    assert statuses(later) == [("skipped", "digested")]


def test_cap_window_slides(app, fake_provider, make_delivery):
    type_ = capped(1, window=60)
    user = UserFactory()
    first = make_delivery(user=user, type_=type_)
    deliver_batch("email", [first.id])
    db.session.execute(sa.text("UPDATE delivery_cap_uses SET used_at = now() - interval '61 seconds'"))
    db.session.commit()
    second = make_delivery(user=user, type_=type_)

    deliver_batch("email", [second.id])

    assert statuses(first, second) == [("sent", None), ("sent", None)]


def test_a_retry_keeps_its_cap_slot(app, fake_provider, make_delivery):
    from app.providers import TransientError

    type_ = capped(1)
    delivery = make_delivery(type_=type_)
    fake_provider.fail_next(TransientError("busy"))
    deliver_batch("email", [delivery.id])
    assert reload(delivery).status == "pending"
    db.session.execute(sa.text("UPDATE notification_deliveries SET next_attempt_at = now() - interval '1 second'"))
    db.session.commit()

    deliver_batch("email", [delivery.id])

    assert statuses(delivery) == [("sent", None)]


def test_cap_under_eight_concurrent_workers_never_exceeds_it(app, fake_provider, make_delivery):
    type_ = capped(5)
    user = UserFactory()
    ids = [make_delivery(user=user, type_=type_).id for _ in range(40)]
    db.session.commit()
    random.Random(7).shuffle(ids)
    batches = [sorted(ids[i::8]) for i in range(8)]
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker(batch):
        try:
            with app.app_context():
                barrier.wait()
                deliver_batch("email", batch)
                db.session.remove()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(batch,)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert errors == []
    counts = dict(
        db.session.execute(
            sa.text(
                "SELECT status || ':' || coalesce(skip_reason, ''), count(*) FROM notification_deliveries GROUP BY 1"
            )
        ).all()
    )
    assert counts == {"sent:": 5, "skipped:digested": 35}
    assert len(fake_provider.sent) == 5
