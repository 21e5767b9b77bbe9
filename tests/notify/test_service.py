"""notify(): one set-based statement for rows, preferences and deliveries, in the caller's transaction."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.inbox.queries import badge_count, notification_page
from app.models import PushSubscription
from app.notify import queries
from app.notify.service import NotifyError, notify
from tests.factories import NotificationTypeFactory, PreferenceFactory, UserFactory


def _deliveries() -> list[tuple]:
    return db.session.execute(
        sa.text(
            "SELECT n.user_id, d.channel, d.status, d.skip_reason FROM notification_deliveries d "
            "JOIN notifications n ON n.id = d.notification_id ORDER BY n.user_id, d.channel"
        )
    ).all()


def _send(refs, by="user_id", **fields):
    params = {"type_": "news", "title": "Hello", "body": "", "dedupe_key": "news:1", **fields}
    return notify(refs, by=by, **params)


@pytest.fixture
def news():
    """A type with every channel on by default, on the low queue."""
    return NotificationTypeFactory(type="news", default_email=True, default_push=True, priority="low")


def test_each_channel_follows_defaults_preferences_and_addresses(news):
    plain, muted, no_address, subscribed = UserFactory.create_batch(4)
    no_address.email = None
    db.session.add(PushSubscription(user_id=subscribed.id, endpoint="https://push.example/a", p256dh="k", auth="a"))
    PreferenceFactory(user_id=muted.id, type="news", channel="email", enabled=False)
    PreferenceFactory(user_id=muted.id, type="news", channel="push", enabled=False)
    db.session.flush()
    result = _send([plain.id, muted.id, no_address.id, subscribed.id])
    assert _deliveries() == [
        (plain.id, "email", "pending", None),
        (plain.id, "push", "skipped", "no_push_subscription"),
        (no_address.id, "email", "skipped", "no_email_address"),
        (no_address.id, "push", "skipped", "no_push_subscription"),
        (subscribed.id, "email", "pending", None),
        (subscribed.id, "push", "pending", None),
    ]
    assert result.priority == "low"
    assert len(result.pending["email"]) == 2 and len(result.pending["push"]) == 1


def test_invalidated_push_subscription_does_not_count(news):
    user = UserFactory()
    db.session.add(
        PushSubscription(
            user_id=user.id, endpoint="https://push.example/b", p256dh="k", auth="a", invalidated_at=sa.func.now()
        )
    )
    db.session.flush()
    _send([user.id])
    assert (user.id, "push", "skipped", "no_push_subscription") in _deliveries()


def test_mandatory_types_ignore_opt_outs_even_in_the_table():
    NotificationTypeFactory(type="security", default_email=True, mandatory=True)
    user = UserFactory()
    PreferenceFactory(user_id=user.id, type="security", channel="email", enabled=False)
    PreferenceFactory(user_id=user.id, type="security", channel="in_app", enabled=False)
    result = _send([user.id], type_="security")
    assert _deliveries() == [(user.id, "email", "pending", None)]
    assert result.recipients[0].in_app is True


def test_in_app_off_rows_are_born_read_and_hidden_from_inbox_and_badge(news):
    user = UserFactory()
    PreferenceFactory(user_id=user.id, type="news", channel="in_app", enabled=False)
    result = _send([user.id])
    (recipient,) = result.recipients
    assert recipient.created and recipient.in_app is False
    assert badge_count(user.id) == 0
    assert notification_page(user.id).rows == []
    assert result.badge_user_ids() == []
    assert [row[1] for row in _deliveries()] == ["email", "push"]  # it still anchors the deliveries


def test_repeat_dedupe_key_returns_the_existing_row_and_adds_no_deliveries(news):
    user = UserFactory()
    first = _send([user.id]).recipients[0]
    again = _send([user.id], title="Changed")
    assert again.recipients[0].notification_id == first.notification_id
    assert again.recipients[0].created is False and again.pending == {"email": [], "push": [], "sms": [], "chat": []}
    assert len(_deliveries()) == 2


def test_unknown_recipients_write_nothing_when_strict(news):
    user = UserFactory()
    with pytest.raises(NotifyError) as error:
        _send([user.external_id, "nobody", "ghost"], by="external_id")
    assert error.value.unknown_recipients == ["nobody", "ghost"]
    assert db.session.execute(sa.text("SELECT count(*) FROM notifications")).scalar_one() == 0


def test_unknown_recipients_are_skipped_when_not_strict(news):
    user = UserFactory()
    result = _send([user.id, 10**12], strict=False)
    assert [r.user_id for r in result.recipients] == [user.id]


def test_unknown_type_writes_nothing(news):
    user = UserFactory()
    with pytest.raises(NotifyError) as error:
        _send([user.id], type_="nope")
    assert error.value.unknown_type == "nope"
    assert db.session.execute(sa.text("SELECT count(*) FROM notifications")).scalar_one() == 0


def test_data_and_link_are_stored(news):
    user = UserFactory()
    result = _send([user.id], data={"n": [1, 2]}, link_path="/x")
    row = db.session.execute(
        sa.text("SELECT data, campaign_id, link_path FROM notifications WHERE id = :id"),
        {"id": result.recipients[0].notification_id},
    ).one()
    assert tuple(row) == ({"n": [1, 2]}, None, "/x")


def test_a_hundred_recipients_take_one_statement(news, statements):
    users = UserFactory.create_batch(100)
    statements.clear()
    result = _send([u.external_id for u in users], by="external_id")
    assert len(statements) == 1
    assert len(result.recipients) == 100 and len(result.pending["email"]) == 100


def test_existing_notifications_finds_rows_by_dedupe_key(news):
    a, b = UserFactory.create_batch(2)
    ids = {r.user_id: r.notification_id for r in _send([a.id]).recipients}
    assert queries.existing_notifications([a.id, b.id], "news:1") == {a.id: (ids[a.id], True)}


def test_no_recipients_writes_nothing_but_still_checks_the_type(news):
    assert _send([]).recipients == [] and _send([]).priority == "low"
    with pytest.raises(NotifyError):
        _send([], type_="nope")
