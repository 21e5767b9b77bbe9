"""A workflow's test run and history in a real browser: the issue's example run for a large and a small amount
(the SMS sent in one, skipped by its condition in the other, swapped in by htmx), a field error in place, a
rollback to version 1 through the history (asked first, published as version 3); axe in light and dark; 375 px.
And a notification's run on the delivery page, checked by axe too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from app.extensions import db
from app.models import PushSubscription, WorkflowStep
from app.workflows import queries, service
from tests.e2e.helpers import sign_in, wait_for_htmx_idle
from tests.e2e.test_phone_layout import OVERFLOW, SMALL_TARGETS
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.axe import COLOUR_OPTIONS, describe, serious_violations, settle

pytestmark = pytest.mark.e2e

EXAMPLE = {
    "steps": [
        {"kind": "channel", "channel": "in_app"},
        {"kind": "delay", "seconds": 1800},
        {"kind": "channel", "channel": "push", "only_if": ["unread"]},
        {"kind": "delay", "seconds": 14400},
        {"kind": "channel", "channel": "sms", "only_if": ["unread"], "condition": "data.amount > 10000"},
        {"kind": "digest", "frequency": "daily", "only_if": ["unread"], "condition": "!(data.amount > 10000)"},
    ]
}
TRIAL = "/console/types/payment/workflow/test"
HISTORY = "/console/types/payment/workflow/history"
PHONE = {"width": 375, "height": 740}


def _world(live_server) -> str:
    """Commit the payment type running the example (version 2), a member every channel reaches, an operator."""
    with live_server.app_context():
        NotificationTypeFactory(type="payment", label="Payment", default_email=True, default_push=True,
                                default_channels=["sms"])  # fmt: skip
        service.save_draft(None, "payment", EXAMPLE)
        service.publish(None, "payment", note="the <i>example</i>")
        member = UserFactory(external_id="m-1", phone="+819012345678", phone_verified_at=datetime.now(UTC),
                             sms_opt_in=True)  # fmt: skip
        db.session.add(PushSubscription(user_id=member.id, endpoint="https://push.example/1", p256dh="k", auth="a"))
        operator = UserFactory(role="operator", timezone="Asia/Tokyo")
        db.session.commit()
        email = operator.email
        db.session.remove()
    return email


def _axe(page, where: str) -> None:
    wait_for_htmx_idle(page)
    found = serious_violations(page)
    assert not found, describe(found, where)
    page.emulate_media(color_scheme="dark")
    settle(page)
    found = serious_violations(page, COLOUR_OPTIONS)
    page.emulate_media(color_scheme="light")
    settle(page)
    assert not found, describe(found, f"{where} (dark) ")


def _run(page, amount: int) -> None:
    page.get_by_label("Sample payload (JSON)").fill(f'{{"amount": {amount}}}')
    page.get_by_label("Member (external id)").fill("m-1")
    page.get_by_role("button", name="Run the test").click()


def test_a_test_run_then_a_rollback_through_the_history(page, live_server):
    sign_in(page, _world(live_server))
    page.goto(TRIAL)
    page.evaluate("window.__samePage = true")  # htmx swaps the results: the page itself stays

    _run(page, 20000)
    sms = page.locator("#trial-step-5")
    expect(sms).to_have_attribute("data-outcome", "sent")
    expect(sms).to_contain_text("+4 h 30 min")
    expect(page.locator("#trial-step-6")).to_have_attribute("data-outcome", "skipped")
    expect(page.locator(".wf-timeline__svg")).to_be_visible()
    assert page.evaluate("window.__samePage === true")
    _axe(page, "test run, large amount: ")

    _run(page, 500)
    expect(sms).to_have_attribute("data-outcome", "skipped")
    expect(sms).to_contain_text("condition false")
    expect(sms).to_contain_text("data.amount > 10000")
    expect(page.locator("#trial-step-6")).to_have_attribute("data-outcome", "digested")

    page.get_by_label("Member (external id)").fill("nobody")
    page.get_by_role("button", name="Run the test").click()
    expect(page.locator("#member-error")).to_have_text("No member has this external id.")
    expect(page.locator("#member")).to_have_attribute("aria-invalid", "true")
    assert page.evaluate("window.__samePage === true")
    _axe(page, "test run, a field error: ")

    page.goto(HISTORY)
    expect(page.locator("#version-2")).to_have_attribute("aria-current", "true")
    expect(page.locator("#version-2 .wf-version__note")).to_have_text("the <i>example</i>")
    expect(page.locator("#diff-2 ins").first).to_be_visible()
    _axe(page, "history: ")

    page.locator("#version-1").get_by_role("button", name="Roll back to this version").click()
    expect(page.locator("h1")).to_contain_text("Roll back to version 1?")
    _axe(page, "rollback confirmation: ")
    page.get_by_role("button", name="Publish version 3").click()
    expect(page.locator(".alert--success")).to_have_text("Version 3 published: it restores version 1.")
    expect(page.locator("#version-3")).to_have_attribute("aria-current", "true")
    expect(page.locator("#version-3")).to_contain_text("restores version 1")
    expect(page.locator("#version-2 form")).to_have_count(1)  # no longer in force: it can be restored

    page.goto(TRIAL)
    _run(page, 20000)  # now version 3: version 1's steps (from the type's columns: no delays, no conditions)
    expect(page.locator("#trial-output")).to_contain_text("Version 3")
    expect(page.locator("#trial-table")).not_to_contain_text("data.amount")


def test_the_test_run_and_the_history_hold_at_375_px(browser, live_server):
    email = _world(live_server)
    context = browser.new_context(base_url=live_server.base_url, viewport=PHONE, reduced_motion="reduce")
    try:
        page = context.new_page()
        sign_in(page, email)
        page.goto(TRIAL)
        _run(page, 20000)
        expect(page.locator("#trial-step-5")).to_have_attribute("data-outcome", "sent")
        for where in ("test run", "history"):
            if where == "history":
                page.goto(HISTORY)
            width = page.evaluate(OVERFLOW)
            assert width["scroll"] <= width["client"], (where, width)
            assert page.evaluate(SMALL_TARGETS, 44) == [], where
            _axe(page, f"{where} at 375 px: ")
    finally:
        context.close()


def test_a_notifications_run_on_the_delivery_page(page, live_server):
    email = _world(live_server)
    with live_server.app_context():
        version = queries.published("payment")
        steps = {s.position: s.id for s in db.session.query(WorkflowStep).filter_by(version_id=version.id)}
        created = datetime.now(UTC) - timedelta(hours=1)
        n = NotificationFactory(user_id=UserFactory().id, type="payment", created_at=created,
                                workflow_version_id=version.id, data={"amount": 500})  # fmt: skip
        push = DeliveryFactory(notification_id=n.id, channel="push", status="sent", attempts=1,
                               sent_at=created + timedelta(minutes=30), workflow_step_id=steps[3])  # fmt: skip
        DeliveryFactory(notification_id=n.id, channel="sms", status="skipped", skip_reason="condition",
                        workflow_step_id=steps[5])  # fmt: skip
        db.session.commit()
        push_id = push.id
        db.session.remove()
    sign_in(page, email)
    page.goto(f"/console/deliveries/{push_id}")
    expect(page.locator("#run-title")).to_have_text("Workflow version 2")
    expect(page.locator("#run-step-3")).to_have_attribute("aria-current", "true")
    expect(page.locator("#run-step-5")).to_contain_text("condition false")
    _axe(page, "delivery page with its run: ")
