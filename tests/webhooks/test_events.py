"""Each change emits its webhook event in its own transaction (the outbox); nobody subscribed costs nothing."""

from __future__ import annotations

import json

import pytest

from app.delivery.service import turn_off_email
from app.extensions import db
from app.inbox import service as inbox
from app.notify.service import notify
from app.preferences.service import set_preference
from app.unitofwork import commit
from app.webhooks import events, service
from jobs.delivery import deliver_batch
from tests.factories import NotificationFactory, UserFactory
from tests.hooks.conftest import mailgun_body
from tests.webhooks.helpers import drain, register, rows

pytestmark = pytest.mark.committed


def payloads(event_type: str) -> list[dict]:
    return [json.loads(r.payload)["data"] for r in rows("event_type = :t", t=event_type)]


@pytest.fixture
def everything(app, local_webhooks, receiver):
    """An endpoint that wants every event."""
    return register(receiver, events.EVENT_TYPES)


def test_notify_emits_created_once_per_new_row(app, everything, email_type):
    users = [UserFactory() for _ in range(2)]
    commit()
    notify([u.external_id for u in users], type_="comment", title="Hi", body="b", dedupe_key="k1")
    notify([users[0].external_id], type_="comment", title="Hi", body="b", dedupe_key="k1")  # a repeat: no event
    commit()
    created = payloads("notification.created")
    assert sorted(p["user_id"] for p in created) == sorted(u.id for u in users)
    # the product knows its users by external id: every event naming a user carries it
    assert sorted(p["user"] for p in created) == sorted(u.external_id for u in users)


def test_inbox_changes_emit_read_archived_seen(app, everything, email_type):
    user = UserFactory()
    first, second, third = (NotificationFactory(user_id=user.id, type="comment") for _ in range(3))
    commit()
    inbox.record_seen(user.id)
    inbox.mark_read(user.id, first.id)
    inbox.mark_read(user.id, first.id)  # already read: changes nothing, emits nothing
    inbox.archive(user.id, second.id)
    inbox.read_all(user.id)
    commit()
    who = {"user_id": user.id, "user": user.external_id}
    assert payloads("notification.seen") == [who]
    assert payloads("notification.read") == [
        {**who, "notification_id": first.id},
        {**who, "all": True, "count": 1},
    ]
    assert payloads("notification.archived") == [{**who, "notification_id": second.id}]


def test_a_rolled_back_change_emits_nothing(app, everything, email_type):
    user = UserFactory()
    n = NotificationFactory(user_id=user.id, type="comment")
    commit()
    inbox.mark_read(user.id, n.id)
    db.session.rollback()
    assert rows() == []


def test_preference_and_unsubscribe(app, everything, email_type):
    user = UserFactory()
    commit()
    set_preference(user.id, "comment", "push", False)
    assert turn_off_email(user.id, "comment").status == "done"
    assert turn_off_email(user.id, "comment").status == "done"  # the second click: no second event
    commit()
    who = {"user_id": user.id, "user": user.external_id}
    assert payloads("preference.updated") == [{**who, "type": "comment", "channel": "push", "enabled": False}]
    assert payloads("user.unsubscribed") == [{**who, "type": "comment", "channel": "email"}]


def test_sent_and_failed_deliveries_emit_in_the_record_statement(app, everything, fake_provider, make_delivery):
    from app.providers import PermanentError

    ok, bad = make_delivery(), make_delivery()
    commit()
    deliver_batch("email", [ok.id])
    fake_provider.fail_next(PermanentError("550 no such user", kind="bounce"))
    deliver_batch("email", [bad.id])
    sent, failed = payloads("delivery.sent"), payloads("delivery.failed")
    assert [(p["delivery_id"], p["status"], p["channel"]) for p in sent] == [(ok.id, "sent", "email")]
    assert sent[0]["user"] is not None  # the ledger's own statement names the user by external id too
    assert [(p["delivery_id"], p["status"], p["error_kind"]) for p in failed] == [(bad.id, "failed", "bounce")]
    drain()
    assert {r.status for r in rows()} == {"sent"}


def test_provider_events_emit_delivered_and_bounced(app, everything, client, mailgun_key, make_delivery):
    alice = UserFactory(email="alice@example.com")
    delivery = make_delivery(user=alice, status="sent", attempts=1, provider="smtp")
    delivery.provider_message_id = f"<delivery-{delivery.id}@hato.example>"
    commit()
    message_id = delivery.provider_message_id
    for kind, extra in (("delivered", {}), ("failed", {"severity": "permanent", "reason": "bounce"})):
        body = mailgun_body(message_id, event=kind, **extra)
        assert client.post("/hooks/providers/mailgun", data=body, content_type="application/json").status_code == 200
    [delivered], [bounced] = payloads("delivery.delivered"), payloads("delivery.bounced")
    assert delivered["delivery_id"] == bounced["delivery_id"] == delivery.id
    assert bounced["provider"] == "mailgun"


def test_nobody_subscribed_means_no_statement(app, everything, email_type, monkeypatch):
    user = UserFactory()
    n = NotificationFactory(user_id=user.id, type="comment")
    commit()
    service.update_endpoint(None, everything, ["user.unsubscribed"], enabled=True)
    commit()
    monkeypatch.setattr(service, "EMIT_SQL", None)  # would fail if executed
    inbox.mark_read(user.id, n.id)
    commit()
    assert rows() == []
