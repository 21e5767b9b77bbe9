"""Channels in a real browser, with a real worker, sweeper and SMTP sink (issue 27).

1. `channels: ["push", "email"]` with `channel_mode: "first"` for a member without a push subscription: the
   e-mail arrives, and the delivery log says why push was passed over.
2. An operator sets a type's channel order and mode in the console.
3. An operator pauses e-mail with a reason: nothing goes out and the page says what waits; resuming sends it
   within a sweep. Both console pages also hold at 375 px.
"""

from __future__ import annotations

import re
import time

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.api_keys.scopes import SCOPES
from app.api_keys.service import create_api_key
from app.cli.vapid import generate_keys
from app.delivery.policy import UNTIL_PART_RESUMED
from app.extensions import db
from tests.e2e.helpers import sign_in
from tests.e2e.test_phone_layout import OVERFLOW, SMALL_TARGETS
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e


def _world(live_server) -> dict:
    """Commit the type `reply` (e-mail and push on), a member without a push subscription, an operator, a key."""
    with live_server.app_context():
        NotificationTypeFactory(type="reply", label="Replies", default_email=True, default_push=True)
        member = UserFactory(email="member@example.com", external_id="member-1")
        operator = UserFactory(email="operator@example.com", role="operator")
        key = create_api_key(None, "e2e", SCOPES)
        db.session.commit()
        world = {"member": member.email, "operator": operator.email, "key": key}
        db.session.remove()
    return world


def _send(page, live_server, key: str, **fields) -> int:
    body = {"type": "reply", "recipient": "member-1", "title": "Ann replied", "body": "Nice!", **fields}
    answer = page.request.post(live_server.base_url + "/v1/notifications", data=body,
                               headers={"Authorization": f"Bearer {key}"})  # fmt: skip
    assert answer.status == 202, answer.text()
    return answer.json()["results"][0]["notification_id"]


def _deliveries(live_server, notification_id: int) -> list[tuple]:
    with live_server.app_context():
        db.session.remove()
        rows = db.session.execute(
            sa.text("SELECT channel, status, skip_reason FROM notification_deliveries WHERE notification_id = :id "
                    "ORDER BY route_rank NULLS LAST, id"), {"id": notification_id})  # fmt: skip
        found = [tuple(row) for row in rows]
        db.session.remove()
    return found


def _held(live_server, notification_id: int) -> int:
    """How many of the notification's rows wait for a resume (what the channel page counts)."""
    with live_server.app_context():
        db.session.remove()
        held = db.session.execute(
            sa.text("SELECT count(*) FROM notification_deliveries WHERE notification_id = :id "
                    "AND status = 'pending' AND next_attempt_at >= :until"),
            {"id": notification_id, "until": UNTIL_PART_RESUMED}).scalar_one()  # fmt: skip
        db.session.remove()
    return held


@pytest.fixture
def push_workers(processes, sink):
    """A worker and a sweeper with Web Push configured (VAPID keys), e-mail to the sink."""
    public, private = generate_keys()
    env = dict(SMTP_URL=f"smtp://127.0.0.1:{sink[0]}", EMAIL_PROVIDER="smtp", SWEEP_INTERVAL_SECONDS=0.5,
               VAPID_PUBLIC_KEY=public, VAPID_PRIVATE_KEY=private)  # fmt: skip
    for command in ("worker", "sweep"):
        processes(command, **env)


def test_first_mode_falls_back_to_email_and_the_log_says_why_push_was_passed_over(page, live_server, push_workers,
                                                                                  sink):  # fmt: skip
    world = _world(live_server)
    notification = _send(page, live_server, world["key"], channels=["push", "email"], channel_mode="first")

    wait_for(lambda: len(sink[1].messages) == 1, 30, "the e-mail at the sink")
    assert sink[1].messages[0].rcpt_tos == [world["member"]]
    wait_for(lambda: _deliveries(live_server, notification)[1][1] == "sent", 10, "the e-mail recorded sent")
    assert _deliveries(live_server, notification) == [("push", "passed", "no_subscription"), ("email", "sent", None)]

    sign_in(page, world["operator"])
    page.goto("/console/deliveries")
    push_row = page.locator("tbody tr", has_text="no_subscription")
    expect(push_row).to_contain_text("Push")
    expect(push_row).to_contain_text("passed over")
    page.locator("tbody tr", has_text="E-mail").get_by_role("link").first.click()
    chain = page.locator("#chain")
    expect(chain).to_contain_text("Channel order")
    expect(chain.locator("li").nth(0)).to_contain_text("no_subscription")
    expect(chain.locator("li").nth(1)).to_contain_text("chosen")


def test_an_operator_orders_a_types_channels_and_pauses_and_resumes_email(page, live_server, workers, sink):
    world = _world(live_server)
    sign_in(page, world["operator"])

    # The order is the workflow's (issue 31): push moved above e-mail, SMS and chat taken out, published.
    page.goto("/console/types/reply/workflow")
    page.get_by_role("button", name="Remove: step 5").click()
    expect(page.locator("#step-5")).to_have_count(0)
    page.get_by_role("button", name="Remove: step 4").click()
    expect(page.locator("#step-4")).to_have_count(0)
    page.get_by_role("button", name="Move up: step 3").click()
    expect(page.locator("#step-2-channel")).to_have_value("push")
    page.get_by_role("button", name="Publish").click()
    expect(page.locator(".alert--success")).to_contain_text("Version 2 published")
    page.goto("/console/types/reply/edit")
    page.get_by_label("only the first listed channel that reaches the member").check()
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".alert--success")).to_contain_text("Type reply saved")
    page.goto("/console/types/reply/workflow")
    expect(page.locator("#step-2-channel")).to_have_value("push")
    expect(page.locator("#step-3-channel")).to_have_value("email")

    page.goto("/console/channels")
    email = page.locator("#channel-email")
    email.get_by_label("Why pause E-mail?").fill("SMTP relay migration")
    email.get_by_role("button", name="Pause E-mail").click()
    expect(page.locator(".alert--success")).to_contain_text("email paused")
    expect(email.locator("header")).to_contain_text("Paused")
    expect(email).to_contain_text("SMTP relay migration")

    notification = _send(page, live_server, world["key"], channels=["email"], channel_mode="all")
    # "pending" alone is also the row before any worker claimed it: wait for the hold itself
    wait_for(lambda: _held(live_server, notification) == 1, 20, "the row held until resumed")
    time.sleep(2)  # several sweeps: still nothing
    assert sink[1].messages == []
    page.reload()
    expect(email.locator("header")).to_contain_text(re.compile(r"1 delivery waits"))

    page.once("dialog", lambda dialog: dialog.accept())
    email.get_by_role("button", name="Resume E-mail").click()
    expect(page.locator(".alert--success")).to_contain_text("email resumed")
    wait_for(lambda: len(sink[1].messages) == 1, 20, "the e-mail after the resume")
    assert sink[1].messages[0].message["Subject"] == "Ann replied"


def test_the_channel_pages_hold_at_375_px(browser, live_server):
    world = _world(live_server)
    context = browser.new_context(base_url=live_server.base_url, viewport={"width": 375, "height": 740})
    try:
        page = context.new_page()
        sign_in(page, world["operator"])
        for path in ("/console/channels", "/console/types/reply/edit"):
            page.goto(path)
            width = page.evaluate(OVERFLOW)
            assert width["scroll"] <= width["client"], (path, width)
            assert page.evaluate(SMALL_TARGETS, 44) == [], path
    finally:
        context.close()
