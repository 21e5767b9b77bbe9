"""POST /v1/notifications `channels` and `channel_mode` (seed 003): the order, "all" and "first" chains.

A "first" chain writes the first channel pending and the others standby; the engine hands over (a trigger
makes the row `passed` and the next one pending) when a channel cannot reach the member or fails for good,
and closes the rest once one is sent.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.providers import PermanentError, TransientError
from app.unitofwork import commit
from jobs.delivery import deliver_batch
from tests.api.conftest import send_body
from tests.factories import NotificationTypeFactory, PreferenceFactory, UserFactory


def rows(notification_id: int) -> list[tuple]:
    db.session.expire_all()
    return [
        tuple(r)
        for r in db.session.execute(
            sa.text(
                "SELECT channel, status, skip_reason, route_rank FROM notification_deliveries "
                "WHERE notification_id = :id ORDER BY route_rank NULLS LAST, channel"
            ),
            {"id": notification_id},
        )
    ]


def post(api, recipient, **fields) -> int:
    response = api.post("/v1/notifications", send_body(recipient.external_id, **fields))
    assert response.status_code == 202, response.get_json()
    return response.get_json()["results"][0]["notification_id"]


@pytest.fixture
def both_type():
    """comment: in-app, e-mail and push on by default."""
    return NotificationTypeFactory(type="comment", default_email=True, default_push=True)


def test_all_mode_sends_only_the_listed_channels(api, both_type, recipient):
    notification = post(api, recipient, channels=["email"])

    assert rows(notification) == [("email", "pending", None, None)]


def test_first_mode_writes_the_first_channel_pending_and_the_rest_standby(api, both_type, recipient):
    notification = post(api, recipient, channels=["push", "email"], channel_mode="first")

    assert rows(notification) == [("push", "pending", None, 0), ("email", "standby", None, 1)]


def test_in_app_follows_the_type_and_preference_whatever_the_list(api, both_type, recipient):
    notification = post(api, recipient, channels=["in_app", "email"])

    in_app = db.session.execute(sa.text("SELECT in_app FROM notifications WHERE id = :id"), {"id": notification})
    assert in_app.scalar_one() is True and rows(notification) == [("email", "pending", None, None)]


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"channels": ["fax"]}, "channels"),
        ({"channels": ["email", "email"]}, "channels"),
        ({"channels": []}, "channels"),
        ({"channels": "email"}, "channels"),
        ({"channel_mode": "some"}, "channel_mode"),
    ],
)
def test_bad_channels_are_422_naming_the_field_and_write_nothing(api, both_type, recipient, fields, field):
    response = api.post("/v1/notifications", send_body(recipient.external_id, **fields))

    assert response.status_code == 422
    assert any(e["field"].split(".")[0].split("[")[0] == field for e in response.get_json()["errors"])
    assert db.session.execute(sa.text("SELECT count(*) FROM notifications")).scalar_one() == 0


def test_the_types_own_order_and_mode_apply_when_the_request_names_none(api, recipient):
    NotificationTypeFactory(type="comment", default_email=True, default_push=True, channels=["email", "push"],
                            channel_mode="first")  # fmt: skip

    notification = post(api, recipient)

    assert rows(notification) == [("email", "pending", None, 0), ("push", "standby", None, 1)]


def test_the_openapi_document_lists_the_registrys_channels(api):
    spec = api.get("/v1/openapi.json").get_json()
    body = spec["components"]["schemas"]["NotificationIn"]["properties"]
    assert body["channels"]["items"]["enum"] == ["in_app", "email", "push", "sms", "chat"]
    assert body["channel_mode"]["enum"] == ["all", "first"]


@pytest.mark.committed  # the engine records on its own autocommit connection
class TestChains:
    """The engine hands over along the chain (the fake provider stands in for e-mail)."""

    def test_no_push_subscription_passes_to_email_and_the_api_says_why(self, app, api, fake_provider, both_type,
                                                                        recipient):  # fmt: skip
        notification = post(api, recipient, channels=["push", "email"], channel_mode="first")
        push, email = _ids(notification)

        assert deliver_batch("push", [push]) == {"claimed": 1, "skipped": 1}
        assert rows(notification) == [("push", "passed", "push_not_configured", 0), ("email", "pending", None, 1)]
        assert deliver_batch("email", [email]) == {"claimed": 1, "sent": 1}

        assert rows(notification) == [("push", "passed", "push_not_configured", 0), ("email", "sent", None, 1)]
        shown = api.get(f"/v1/notifications/{notification}").get_json()["deliveries"]
        assert [(d["channel"], d["status"], d["route_rank"], d["skip_reason"]) for d in shown] == [
            ("push", "passed", 0, "push_not_configured"),
            ("email", "sent", 1, None),
        ]

    def test_a_sent_channel_closes_the_rest(self, app, api, fake_provider, recipient):
        NotificationTypeFactory(type="comment", default_email=True, default_push=True)
        notification = post(api, recipient, channels=["email", "push"], channel_mode="first")
        email, _push = _ids(notification)

        deliver_batch("email", [email])

        assert rows(notification) == [("email", "sent", None, 0), ("push", "skipped", "not_needed", 1)]

    def test_a_permanent_failure_hands_over_and_the_last_failure_is_the_dlq(self, app, api, fake_provider,
                                                                             recipient, monkeypatch):  # fmt: skip
        NotificationTypeFactory(type="comment", default_email=True)
        PreferenceFactory(user_id=recipient.id, type="comment", channel="push", enabled=False)
        monkeypatch.setitem(app.config, "PUSH_PROVIDER", "fake")  # push configured (through the fake)
        notification = post(api, recipient, channels=["email", "push"], channel_mode="first")
        email, push = _ids(notification)
        fake_provider.fail_next(PermanentError("550 no such user", kind="bounce"))

        deliver_batch("email", [email])
        assert rows(notification) == [("email", "passed", None, 0), ("push", "pending", None, 1)]
        deliver_batch("push", [push])  # the member turned push off: nothing left to try

        assert rows(notification) == [("email", "passed", None, 0), ("push", "skipped", "preference_off", 1)]
        failed = db.session.execute(sa.text("SELECT count(*) FROM notification_deliveries WHERE status = 'failed'"))
        assert failed.scalar_one() == 0  # a channel that handed over is not in the DLQ

    def test_transient_failures_retry_the_same_channel_until_exhausted_then_move_on(
        self, app, api, fake_provider, recipient, monkeypatch
    ):
        NotificationTypeFactory(type="comment", default_email=True, default_push=True)
        monkeypatch.setitem(app.config, "RETRY_MAX_ATTEMPTS", 2)
        monkeypatch.setitem(app.config, "PUSH_PROVIDER", "fake")
        notification = post(api, recipient, channels=["email", "push"], channel_mode="first")
        email, push = _ids(notification)
        fake_provider.fail_next(TransientError("451 try later", kind="smtp_451"), times=2)

        deliver_batch("email", [email])
        assert rows(notification)[0][:2] == ("email", "pending")  # a retry on the same channel
        _due_now(email)
        deliver_batch("email", [email])

        assert rows(notification)[:2] == [("email", "passed", None, 0), ("push", "pending", None, 1)]
        error = db.session.execute(
            sa.text("SELECT error_kind FROM notification_deliveries WHERE id = :id"), {"id": email}
        ).scalar_one()
        assert error == "exhausted"

    def test_a_cancellation_stops_the_whole_chain(self, app, api, recipient):
        NotificationTypeFactory(type="comment", default_email=True, default_push=True)
        notification = post(api, recipient, channels=["email", "push"], channel_mode="first", cancellation_key="c-1")

        assert api.delete("/v1/cancellations/c-1").status_code == 200

        assert rows(notification) == [("email", "skipped", "cancelled", 0), ("push", "skipped", "cancelled", 1)]


def _ids(notification_id: int) -> list[int]:
    return list(
        db.session.execute(
            sa.text("SELECT id FROM notification_deliveries WHERE notification_id = :id ORDER BY route_rank"),
            {"id": notification_id},
        ).scalars()
    )


def _due_now(delivery_id: int) -> None:
    db.session.execute(sa.text("UPDATE notification_deliveries SET next_attempt_at = now() WHERE id = :id"),
                       {"id": delivery_id})  # fmt: skip
    commit()


def test_members_of_other_users_are_not_affected(api, both_type, recipient):
    other = UserFactory(external_id="someone-else")
    post(api, recipient, channels=["push", "email"], channel_mode="first")

    theirs = db.session.execute(
        sa.text("SELECT count(*) FROM notification_deliveries WHERE user_id = :u"), {"u": other.id}
    ).scalar_one()
    assert theirs == 0
