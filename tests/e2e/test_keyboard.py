"""The inbox with the keyboard only: j/k between rows, read, e archives, Shift+I marks all read, ? lists the
shortcuts (Escape closes), Enter opens; shortcuts stay quiet in fields and with Ctrl/Alt/Meta.
After every step the test asserts where the focus is (document.activeElement)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from app.extensions import db
from tests.e2e.helpers import open_inbox
from tests.factories import NotificationFactory, NotificationTypeFactory, UserFactory
from tests.realtime.helpers import api_notify, create_api_key
from tests.support.axe import sign_in_any_language

pytestmark = pytest.mark.e2e

TITLES = ["Alpha", "Beta", "Gamma", "Delta"]  # newest first


def _member(live_server, locale: str = "en") -> tuple[str, list[str]]:
    """Commit a member with four unread notifications (links back to the inbox); their e-mail and row ids."""
    with live_server.app_context():
        user = UserFactory(locale=locale, timezone="Asia/Tokyo")
        NotificationTypeFactory(type="comment")
        now = datetime.now(UTC)
        rows = [
            NotificationFactory(
                user_id=user.id, title=title, link_path="/inbox?filter=all", created_at=now - timedelta(minutes=age)
            )
            for age, title in enumerate(TITLES, start=1)
        ]
        db.session.commit()
        email, ids = user.email, [f"notification-{row.id}" for row in rows]
        db.session.remove()
    return email, ids


def _focused(page) -> str:
    """The id of the focused element, or of the row around it, or its tag."""
    return page.evaluate(
        """() => {
          const el = document.activeElement;
          if (!el || el === document.body) return "body";
          return el.id || (el.closest("li.item") ? "in:" + el.closest("li.item").id : el.tagName.toLowerCase());
        }"""
    )


def _focus_is(page, expected: str) -> None:
    page.wait_for_function(
        """expected => {
          const el = document.activeElement;
          const row = el && el.closest && el.closest("li.item");
          return (el && el.id === expected) || (!!row && "in:" + row.id === expected);
        }""",
        arg=expected,
        timeout=5000,
    )
    assert _focused(page) == expected


def test_the_inbox_works_with_the_keyboard_alone(page, live_server):
    email, (alpha, beta, gamma, delta) = _member(live_server)
    sign_in_any_language(page, email)
    page.goto("/inbox")
    page.wait_for_function("() => document.readyState === 'complete' && window.htmx !== undefined")
    page.evaluate("document.activeElement && document.activeElement.blur()")
    badge = page.locator("#inbox-badge")
    expect(badge).to_have_text("4")

    # j/k: from nowhere j starts at the first row; k goes back; the list's ends hold.
    page.keyboard.press("j")
    _focus_is(page, alpha)
    page.keyboard.press("j")
    _focus_is(page, beta)
    page.keyboard.press("k")
    _focus_is(page, alpha)
    page.keyboard.press("k")
    _focus_is(page, alpha)
    page.keyboard.press("j")
    _focus_is(page, beta)
    # The focused row is visibly marked (a :focus-visible outline, not the browser's nothing).
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"

    # Read with the row's own button (Tab past its checkbox and title, Enter): the row is redrawn read and keeps
    # the focus.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Select: Beta"
    page.keyboard.press("Tab")
    _focus_is(page, f"in:{beta}")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Mark read: Beta"
    page.keyboard.press("Enter")
    expect(page.locator(f"#{beta}")).not_to_have_class(re.compile(r"item--unread"))
    _focus_is(page, beta)
    expect(badge).to_have_text("3")

    # e archives the focused row; it stays (greyed) and the focus moves on to the next row.
    page.keyboard.press("e")
    expect(page.locator(f"#{beta}")).to_have_class(re.compile(r"item--archived"))
    _focus_is(page, gamma)

    # Ctrl/Alt/Meta+letter belong to the browser: nothing is archived.
    page.keyboard.press("Control+e")
    page.keyboard.press("Alt+j")
    _focus_is(page, gamma)
    expect(page.locator(f"#{gamma}")).not_to_have_class(re.compile(r"item--archived"))

    # In a field, letters are letters: open the row's "More" menu and type into the snooze picker.
    page.keyboard.press("Tab")  # the row's checkbox (bulk actions)
    page.keyboard.press("Tab")  # the title's button
    page.keyboard.press("Tab")  # Mark read
    page.keyboard.press("Tab")  # Archive
    page.keyboard.press("Tab")  # More
    assert page.evaluate("document.activeElement.tagName") == "SUMMARY"
    page.keyboard.press("Enter")
    picker = page.locator(f"#{gamma} input[type=datetime-local]")
    expect(picker).to_be_visible()
    picker.focus()
    page.keyboard.press("j")
    page.keyboard.press("e")
    expect(picker).to_be_focused()
    expect(page.locator(f"#{gamma}")).not_to_have_class(re.compile(r"item--archived"))
    # Escape closes the menu and returns to its toggle.
    page.keyboard.press("Escape")
    expect(page.locator(f"#{gamma} details.menu")).not_to_have_attribute("open", "")
    assert page.evaluate("document.activeElement.tagName") == "SUMMARY"
    _focus_is(page, f"in:{gamma}")
    page.keyboard.press("k")
    _focus_is(page, beta)
    page.keyboard.press("j")
    _focus_is(page, gamma)

    # Shift+I marks everything read; the list is redrawn and the same row keeps the focus.
    page.keyboard.press("Shift+I")
    expect(page.locator("#inbox-content li.item--unread")).to_have_count(0)
    expect(badge).to_have_text("")
    _focus_is(page, gamma)

    # ? opens the shortcut list as a modal dialog; Escape closes it and the focus comes back.
    page.keyboard.press("?")
    dialog = page.locator("dialog#shortcuts")
    expect(dialog).to_have_attribute("open", "")
    expect(dialog.get_by_role("heading", name="Keyboard shortcuts")).to_be_visible()
    assert page.evaluate("document.getElementById('shortcuts').contains(document.activeElement)")
    page.keyboard.press("j")  # the list underneath does not move while the dialog is open
    page.keyboard.press("Escape")
    expect(dialog).not_to_have_attribute("open", "")
    _focus_is(page, gamma)

    # Enter on a row opens it (its link), like clicking the title.
    page.keyboard.press("k")
    page.keyboard.press("k")
    _focus_is(page, alpha)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/inbox\?filter=all$"))


def test_the_shortcut_list_speaks_japanese(page, live_server):
    email, (alpha, *_rest) = _member(live_server, locale="ja")
    sign_in_any_language(page, email)
    page.wait_for_function("() => window.htmx !== undefined")
    assert page.evaluate("document.documentElement.lang") == "ja"
    page.keyboard.press("j")
    _focus_is(page, alpha)
    page.keyboard.press("?")
    dialog = page.locator("dialog#shortcuts")
    expect(dialog.get_by_role("heading", name="キーボードショートカット")).to_be_visible()
    expect(dialog.get_by_role("button", name="閉じる")).to_be_visible()
    page.keyboard.press("Escape")
    _focus_is(page, alpha)


def test_a_rising_count_is_announced_once_politely(page, live_server):
    """The badge is redrawn by every frame; #badge-live speaks only when the count goes up (something arrived)."""
    email, (alpha, *_rest) = _member(live_server)
    with live_server.app_context():
        external_id = db.session.scalar(db.text("SELECT external_id FROM users WHERE email = :e"), {"e": email})
    key = create_api_key(live_server)
    sign_in_any_language(page, email)
    open_inbox(page, live_server.base_url + "/inbox")
    live = page.locator("#badge-live")
    expect(live).to_have_attribute("aria-live", "polite")
    expect(live).to_have_text("")
    page.evaluate(
        """() => { window.__announced = 0;
          new MutationObserver(() => window.__announced++).observe(document.getElementById("badge-live"),
            {childList: true, characterData: true, subtree: true}); }"""
    )

    api_notify(live_server.base_url, key, external_id, "Room booked")
    expect(page.locator("#inbox-badge")).to_have_text("5", timeout=5000)
    expect(live).to_have_text("5 unread")
    page.locator(f"#{alpha}").get_by_role("button", name="Mark read: Alpha").click()
    expect(page.locator("#inbox-badge")).to_have_text("4")
    page.wait_for_timeout(300)  # the frame that follows the read, too
    assert page.evaluate("window.__announced") == 1
    expect(live).to_have_text("5 unread")
