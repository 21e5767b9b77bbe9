"""The workflow editor in a real browser: an operator builds a delivery plan step by step (HTMX re-renders the
list and the diagram), sees a condition's typo flagged live, fixes it and publishes version 2; axe in light and
dark; a phone's 375 px without horizontal scrolling; every step button a real, labelled button."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from app.extensions import db
from tests.e2e.helpers import sign_in, wait_for_htmx
from tests.e2e.workflow_steps import add, choose, condition, seconds, settled
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.axe import describe, serious_violations, settle

pytestmark = pytest.mark.e2e

URL = "/console/types/payment/workflow"
OVERFLOW = "() => document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth"


def _operator(live_server) -> str:
    with live_server.app_context():
        NotificationTypeFactory(type="payment", label="Payments", default_email=True, default_push=True)
        operator = UserFactory(role="operator")
        db.session.commit()
        email = operator.email
        db.session.remove()
    return email


def test_an_operator_builds_and_publishes_a_workflow(page, live_server):
    sign_in(page, _operator(live_server))
    page.goto(URL)
    wait_for_htmx(page)
    expect(page.locator("#workflow-status")).to_contain_text("Version 1 is published")

    # Start from the inbox alone: remove the other steps (real buttons, each named for its step).
    while page.locator("#step-2").count():
        last = page.locator(".workflow-step").count()
        button = page.get_by_role("button", name=f"Remove: step {last}")
        expect(button).to_have_count(1)
        assert button.evaluate("el => el.tagName") == "BUTTON"
        button.click()
        expect(page.locator(f"#step-{last}")).to_have_count(0)
        settled(page)
    expect(page.locator("#step-1-channel")).to_have_value("in_app")

    add(page, "Wait", 2)
    seconds(page, 2, "2")
    add(page, "Send on a channel", 3)
    choose(page, 3, "channel", value="push")
    choose(page, 3, "read", value="unread")
    add(page, "Wait", 4)
    seconds(page, 4, "2")
    add(page, "Send on a channel", 5)
    choose(page, 5, "channel", value="sms")
    choose(page, 5, "read", value="unread")

    # A typo is flagged at its field as it is typed, then the fix says "valid".
    condition(page, 5, "data.amount >> 10000")
    field, status = page.locator("#step-5-condition"), page.locator("#step-5-condition-status")
    expect(field).to_have_attribute("aria-invalid", "true", timeout=15_000)  # the check's round trip, on a busy host
    expect(field).to_be_focused()  # the list was drawn again around the field being typed in
    expect(status).not_to_be_empty()
    expect(status).not_to_have_text("valid")
    condition(page, 5, "data.amount > 10000")
    expect(status).to_have_text("valid")
    expect(field).not_to_have_attribute("aria-invalid", "true")

    add(page, "E-mail digest", 6)
    choose(page, 6, "frequency", value="daily")
    choose(page, 6, "read", value="unread")
    condition(page, 6, "!(data.amount > 10000)")
    expect(page.locator("#step-6-condition-status")).to_have_text("valid")

    # The diagram follows the list: six boxes and an end.
    expect(page.locator(".workflow-diagram .workflow-diagram__box")).to_have_count(6)
    expect(page.locator(".workflow-diagram")).to_contain_text("data.amount > 10000")

    # Moving a step is a labelled button too: down and back up.
    page.get_by_role("button", name="Move down: step 2").click()
    expect(page.locator("#step-2-channel")).to_have_value("push")
    settled(page)
    page.get_by_role("button", name="Move up: step 3").click()
    expect(page.locator("#step-3-channel")).to_have_value("push")
    settled(page)

    page.get_by_label("Note for the new version (optional)").fill("SMS for large amounts, else the digest")
    page.get_by_role("button", name="Publish").click()
    expect(page.locator(".alert--success")).to_contain_text("Version 2 published")
    expect(page.locator("#workflow-status")).to_contain_text("Version 2 is published")
    expect(page.locator("#step-5-condition")).to_have_value("data.amount > 10000")
    expect(page.locator("#step-6-condition")).to_have_value("!(data.amount > 10000)")

    with live_server.app_context():
        from app.workflows import queries

        steps = queries.published("payment").steps["steps"]
        db.session.remove()
    assert steps == [
        {"kind": "channel", "channel": "in_app"},
        {"kind": "delay", "seconds": 2},
        {"kind": "channel", "channel": "push", "only_if": ["unread"]},
        {"kind": "delay", "seconds": 2},
        {"kind": "channel", "channel": "sms", "only_if": ["unread"], "condition": "data.amount > 10000"},
        {"kind": "digest", "only_if": ["unread"], "condition": "!(data.amount > 10000)", "frequency": "daily"},
    ]

    # axe, light and dark, with a problem on show (the error state must pass too).
    condition(page, 5, "data.amount >")
    found = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        settle(page)
        found.append(describe(serious_violations(page), f"{scheme}: "))
    page.emulate_media(color_scheme="light")
    assert not "".join(found), "\n".join(found)

    # A phone: the page does not scroll sideways.
    page.set_viewport_size({"width": 375, "height": 740})
    page.goto(URL)
    wait_for_htmx(page)
    assert page.evaluate(OVERFLOW) <= 0
    expect(page.get_by_role("button", name="Add step")).to_be_visible()
