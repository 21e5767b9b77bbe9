"""Bulk inbox actions in the browser (issue 33), one whole flow: select with x and Shift-click, Archive, Undo, then
Delete all read; the badge follows each step, a reload keeps the result, and the page passes axe at 1280 and 375 px."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from app.extensions import db
from tests.factories import NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.axe import describe, serious_violations, sign_in_any_language

pytestmark = pytest.mark.e2e

TITLES = ["Alpha", "Beta", "Gamma", "Delta"]  # unread, newest first; "Old" is read


def _member(live_server) -> str:
    with live_server.app_context():
        user = UserFactory(timezone="Asia/Tokyo")
        NotificationTypeFactory(type="comment")
        now = datetime.now(UTC)
        for age, title in enumerate(TITLES, start=1):
            NotificationFactory(user_id=user.id, title=title, created_at=now - timedelta(minutes=age))
        NotificationFactory(user_id=user.id, title="Old", created_at=now - timedelta(days=2), read_at=now)
        db.session.commit()
        email = user.email
        db.session.remove()
    return email


def _row(page, title: str):
    return page.locator("#inbox-content li.item", has_text=title)


def test_select_by_keyboard_and_shift_click_archive_undo_and_delete_all_read(page, live_server):
    sign_in_any_language(page, _member(live_server))
    page.goto("/inbox")
    page.wait_for_function("() => document.readyState === 'complete' && window.htmx !== undefined")
    badge, status, bar = page.locator("#inbox-badge"), page.locator("#inbox-status"), page.locator("#inbox-bulk")
    expect(badge).to_have_text("4")
    expect(bar).to_be_hidden()

    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press("j")  # Alpha
    page.keyboard.press("x")
    expect(bar).to_be_visible()
    expect(bar.locator("[data-bulk-count]")).to_have_text("1 selected")
    _row(page, "Gamma").get_by_role("checkbox").click(modifiers=["Shift"])  # the range Alpha..Gamma
    expect(bar.locator("[data-bulk-count]")).to_have_text("3 selected")
    assert page.locator("input[data-bulk-select]:checked").count() == 3
    found = serious_violations(page)  # with the selection bar shown
    assert not found, describe(found)

    bar.get_by_role("button", name="Archive", exact=True).click()
    expect(status).to_have_text("3 notifications archived")
    expect(badge).to_have_text("1")
    expect(_row(page, "Beta")).to_have_count(0)
    expect(bar).to_be_hidden()
    toast = page.locator("[data-undo-toast]")
    expect(toast).to_contain_text("3 notifications archived")

    toast.get_by_role("button", name="Undo").click()
    expect(status).to_have_text("Undone: 3 notifications are back.")
    expect(badge).to_have_text("4")
    expect(_row(page, "Beta")).to_have_count(1)
    expect(toast).to_have_count(0)

    page.get_by_role("button", name="Delete all read").click()
    expect(status).to_have_text("1 notification deleted")
    expect(_row(page, "Old")).to_have_count(0)
    expect(badge).to_have_text("4")

    page.set_viewport_size({"width": 375, "height": 740})
    page.reload()  # applied at once: a reload shows the same list and count
    expect(_row(page, "Old")).to_have_count(0)
    expect(badge).to_have_text("4")
    assert page.evaluate("document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth")
    found = serious_violations(page)
    assert not found, describe(found)
