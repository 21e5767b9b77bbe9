"""BADGE_COUNTS=unseen in a real browser: the badge counts what is new, and opening the inbox anywhere clears it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.extensions import db
from tests.e2e.helpers import open_inbox, sign_in
from tests.factories import NotificationTypeFactory, UserFactory
from tests.realtime.helpers import api_notify, create_api_key

pytestmark = pytest.mark.e2e


def test_the_unseen_badge_drops_to_zero_live_when_another_tab_opens_the_inbox(page, live_server, monkeypatch):
    monkeypatch.setitem(live_server.config, "BADGE_COUNTS", "unseen")
    with live_server.app_context():
        user = UserFactory(display_name="Seen Tester")
        NotificationTypeFactory(type="comment")
        db.session.commit()
        email, external_id = user.email, user.external_id
        db.session.remove()
    key = create_api_key(live_server)

    sign_in(page, email)  # lands on the inbox: nothing new
    open_inbox(page, live_server.base_url + "/preferences")
    badge = page.locator("#inbox-badge")
    expect(badge).to_have_text("")

    for title in ("Deploy finished", "Build #7 failed"):
        api_notify(live_server.base_url, key, external_id, title)
    expect(badge).to_have_text("2", timeout=2000)
    expect(badge).to_have_attribute("aria-label", "2 new")

    inbox = page.context.new_page()
    inbox.goto(live_server.base_url + "/inbox")
    expect(inbox.locator("#inbox-badge")).to_have_text("")
    new_rows = inbox.locator("li.item", has=inbox.locator("[data-new]"))
    expect(new_rows).to_have_count(2)
    expect(new_rows.first).to_contain_text("New")
    expect(new_rows.first).to_have_class(re.compile(r"\bitem--unread\b"))  # new and unread are separate states

    expect(badge).to_have_text("", timeout=2000)  # the first tab, live
    expect(badge).to_have_attribute("data-unseen", "0")
    expect(badge).to_have_attribute("data-unread", "2")
    assert page.evaluate("window.__sameDocument") is True  # no reload

    inbox.reload()
    expect(inbox.locator("[data-new]")).to_have_count(0)
    expect(inbox.locator("li.item.item--unread")).to_have_count(2)
