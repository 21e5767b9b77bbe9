"""A member verifies their number in a real browser (issue 29), with a real worker and sweeper and the Twilio
stand-in: the code arrives by SMS through the engine, typing it verifies the number, the member consents, and
then a notification sent through the API reaches the phone. The section passes axe and holds at 375 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.api_keys.scopes import SCOPES
from app.api_keys.service import create_api_key
from app.extensions import db
from app.providers.httpclients import close_all
from tests.e2e.helpers import sign_in
from tests.e2e.test_phone_layout import OVERFLOW, SMALL_TARGETS
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.axe import describe, serious_violations
from tests.support.twilio_server import TwilioServer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

NUMBER = "+819011112222"


@pytest.fixture
def twilio(live_server, processes):
    """The Twilio stand-in, reached by the live server and by a worker and a sweeper."""
    with TwilioServer(callback_delay=0) as server:
        settings = {**server.settings(), "SMS_PROVIDER": "twilio"}
        saved = {name: live_server.config.get(name) for name in settings}
        live_server.config.update(settings)
        for command in ("worker", "sweep"):
            processes(command, SWEEP_INTERVAL_SECONDS=0.5, **settings)
        yield server
        live_server.config.update(saved)
    close_all()


def _world(live_server) -> dict:
    with live_server.app_context():
        NotificationTypeFactory(type="reminder", label="Reminders", default_channels=["sms"])
        member = UserFactory(email="member@example.com", external_id="member-1", locale="en")
        key = create_api_key(None, "e2e", SCOPES)
        db.session.commit()
        world = {"member": member.email, "key": key}
        db.session.remove()
    return world


def _check_section(page, where: str) -> None:
    violations = serious_violations(page)
    assert not violations, describe(violations, where)


def test_a_member_adds_verifies_and_consents_and_then_gets_sms(page, live_server, twilio, tmp_path):
    world = _world(live_server)
    sign_in(page, world["member"])
    page.goto("/preferences#phone")
    section = page.locator("#phone")
    expect(section.locator("#phone-number")).to_have_text("No number yet")
    _check_section(page, "phone section: ")

    # A bad number: a field error, nothing sent.
    section.get_by_label("Mobile number").fill("090-12")
    section.get_by_role("button", name="Send code").click()
    expect(section.locator("#phone-error")).to_contain_text("too short")
    assert twilio.received == []

    # A national number: the code arrives at the stand-in, sent by the worker.
    section.get_by_label("Mobile number").fill("090-1111-2222")
    section.get_by_role("button", name="Send code").click()
    expect(section.locator(".alert--success")).to_have_text(re.compile(r"We sent a code to \+81•+2222\."))
    wait_for(lambda: twilio.received_by(NUMBER), 30, "the code at the Twilio stand-in")
    (text,) = [m.body for m in twilio.received_by(NUMBER)]
    code = re.search(r"\b(\d{6})\b", text).group(1)
    _check_section(page, "code form: ")

    section.get_by_label(re.compile(r"Code sent to")).fill("000000" if code != "000000" else "111111")
    section.get_by_role("button", name="Verify").click()
    expect(section.locator("#code-error")).to_have_text("That code is not right. 4 tries left.")
    _check_section(page, "wrong code: ")

    section.get_by_label(re.compile(r"Code sent to")).fill(code)
    section.get_by_role("button", name="Verify").click()
    expect(section.locator("#phone-number .tag")).to_have_text("Verified")

    section.get_by_label("Send me SMS").check()
    section.get_by_role("button", name="Save SMS choice").click()
    expect(section.locator(".alert--success")).to_have_text("You will get text messages.")
    _check_section(page, "verified: ")

    # At 375 px the section neither scrolls sideways nor has targets under 44 px.
    page.set_viewport_size({"width": 375, "height": 740})
    page.reload()
    page.locator("#phone").scroll_into_view_if_needed()
    width = page.evaluate(OVERFLOW)
    assert width["scroll"] <= width["client"], width
    assert page.evaluate(SMALL_TARGETS, 44) == []
    page.screenshot(path=str(tmp_path / "phone-section-375.png"), full_page=True)

    # An ordinary SMS now reaches the verified number.
    answer = page.request.post(live_server.base_url + "/v1/notifications",
                               data={"type": "reminder", "recipient": "member-1", "title": "Dentist at 10:00",
                                     "body": "Tomorrow."},
                               headers={"Authorization": f"Bearer {world['key']}"})  # fmt: skip
    assert answer.status == 202, answer.text()
    wait_for(lambda: len(twilio.received_by(NUMBER)) == 2, 30, "the reminder at the Twilio stand-in")
    assert twilio.received_by(NUMBER)[1].body.startswith("Dentist at 10:00\nTomorrow.")
