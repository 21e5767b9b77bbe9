"""Issue 31's example workflow, built in the console and run for real: in-app now; if unread after a delay, push;
if still unread after another and data.amount > 10000, SMS; otherwise the daily digest.

Sped up (delays of a few seconds), with a real worker and sweeper, the Web Push stand-in (VAPID checked, payload
decrypted), the Twilio stand-in and an SMTP sink. Each branch: read before the push; read between push and SMS;
unread and large (push + SMS, no digest); unread and small (push, SMS skipped by its condition, e-mail waiting
for the daily digest).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.extensions import db
from app.inbox import service as inbox
from app.notify.service import notify
from app.unitofwork import commit
from app.workflows import queries
from tests.e2e.helpers import sign_in, wait_for_htmx
from tests.e2e.workflow_steps import build_example, remove_all_but_in_app
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.push import KEYS, PushServer, add_subscription
from tests.support.twilio_server import TwilioServer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

# Seconds: the two delays. The second leaves room for a worker that is still starting when the first ends: the
# read-between run is read as soon as its push arrives, which must be before its SMS falls due.
FIRST, SECOND = 4, 10
NUMBER = "+819055550101"
EXAMPLE = [
    {"kind": "channel", "channel": "in_app"},
    {"kind": "delay", "seconds": FIRST},
    {"kind": "channel", "channel": "push", "only_if": ["unread"]},
    {"kind": "delay", "seconds": SECOND},
    {"kind": "channel", "channel": "sms", "only_if": ["unread"], "condition": "data.amount > 10000"},
    {"kind": "digest", "frequency": "daily", "only_if": ["unread"], "condition": "!(data.amount > 10000)"},
]


@pytest.fixture
def world(live_server, processes, sink):
    """The Web Push service and Twilio stand-ins, a worker and a sweeper, the `order` type and its member."""
    with PushServer() as push, TwilioServer(callback_delay=0) as twilio:
        settings = {
            **twilio.settings(), "SMS_PROVIDER": "twilio", "VAPID_PUBLIC_KEY": KEYS[0], "VAPID_PRIVATE_KEY": KEYS[1],
            "VAPID_SUBJECT": "mailto:ops@hato.test", "PUSH_PROVIDER": "webpush", "PUSH_ALLOW_PRIVATE_ADDRESSES": True,
            "PUSH_ALLOW_HTTP_ENDPOINTS": True, "PUSH_ALLOWED_HOSTS": "127.0.0.1",
            "SMTP_URL": f"smtp://127.0.0.1:{sink[0]}", "EMAIL_PROVIDER": "smtp",
        }  # fmt: skip
        saved = {name: live_server.config.get(name) for name in settings}
        live_server.config.update(settings)
        with live_server.app_context():
            NotificationTypeFactory(type="order", label="Orders", default_email=True, default_push=True,
                                    default_channels=["sms"])  # fmt: skip
            member = UserFactory(email="buyer@example.com", external_id="buyer", locale="en", phone=NUMBER,
                                 phone_verified_at=datetime.now(UTC), sms_opt_in=True)  # fmt: skip
            add_subscription(member, push.subscribe())
            UserFactory(email="ops@example.com", role="operator", locale="en")
            db.session.commit()
            member_id = member.id
            db.session.remove()
        for command in ("worker", "sweep"):
            processes(command, SWEEP_INTERVAL_SECONDS=0.5, **{k: str(v) for k, v in settings.items()})
        yield {"push": push, "twilio": twilio, "sink": sink[1], "member_id": member_id}
        live_server.config.update(saved)


def build_in_console(page) -> None:
    """Publish the example as the `order` type's workflow in the console's editor, as an operator does."""
    sign_in(page, "ops@example.com")
    page.goto("/console/types/order/workflow")
    wait_for_htmx(page)
    remove_all_but_in_app(page)
    build_example(page, FIRST, SECOND)
    page.get_by_role("button", name="Publish").click()
    expect(page.locator("#workflow-status")).to_contain_text("Version 2 is published")


def send(live_server, member_id: int, key: str, amount: int) -> int:
    with live_server.app_context():
        result = notify([member_id], by="user_id", type_="order", title=f"Order {key}", body="Shipped.",
                        dedupe_key=key, data={"amount": amount})  # fmt: skip
        commit().wait()
        found = result.recipients[0].notification_id
        db.session.remove()
    return found


def read(live_server, member_id: int, notification_id: int) -> None:
    with live_server.app_context():
        inbox.mark_read(member_id, notification_id)
        commit().wait()
        db.session.remove()


def rows(live_server, notification_id: int) -> dict[str, tuple]:
    with live_server.app_context():
        db.session.remove()
        found = db.session.execute(
            sa.text(
                "SELECT channel, status, coalesce(skip_reason, last_error) FROM notification_deliveries"
                " WHERE notification_id = :id"
            ),
            {"id": notification_id},
        ).all()
        db.session.remove()
    return {channel: (status, reason) for channel, status, reason in found}


def pushes_for(push, title: str) -> int:
    return sum(1 for r in push.received if r.payload.get("title") == title)


def test_each_branch_of_the_example_workflow(page, live_server, world):
    build_in_console(page)
    with live_server.app_context():
        assert queries.published("order").steps == {"steps": EXAMPLE}
        db.session.remove()
    member_id, push, twilio = world["member_id"], world["push"], world["twilio"]

    read_first = send(live_server, member_id, "read-first", 20000)
    read_between = send(live_server, member_id, "read-between", 20000)
    large = send(live_server, member_id, "large", 20000)
    small = send(live_server, member_id, "small", 500)
    read(live_server, member_id, read_first)  # before the push is due

    wait_for(lambda: pushes_for(push, "Order read-between") == 1, FIRST + 20, "the push after the first delay")
    read(live_server, member_id, read_between)  # after the push, before the SMS

    settled = lambda: all(  # noqa: E731
        status in ("sent", "skipped", "failed")
        for n in (read_first, read_between, large, small)
        for status, _ in rows(live_server, n).values()
    )
    wait_for(settled, FIRST + SECOND + 30, "every step of every run")

    assert rows(live_server, read_first) == {
        "push": ("skipped", "read"), "sms": ("skipped", "read"), "email": ("skipped", "read")}  # fmt: skip
    assert rows(live_server, read_between)["push"] == ("sent", None)
    assert rows(live_server, read_between)["sms"] == ("skipped", "read")
    assert rows(live_server, large) == {
        "push": ("sent", None), "sms": ("sent", None), "email": ("skipped", "condition")}  # fmt: skip
    assert rows(live_server, small) == {
        "push": ("sent", None), "sms": ("skipped", "condition"), "email": ("skipped", "digested")}  # fmt: skip
    # Exactly once each at the stand-ins, nothing for the read-first run; no immediate e-mail at all.
    assert [pushes_for(push, f"Order {k}") for k in ("read-first", "read-between", "large", "small")] == [0, 1, 1, 1]
    assert [m.body.splitlines()[0] for m in twilio.received_by(NUMBER)] == ["Order large"]
    assert world["sink"].messages == [] and push.rejected == []
