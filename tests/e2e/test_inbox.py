"""The inbox in a real browser: open, load more, mark all read, archive, and a hostile title."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from app.extensions import db
from tests.e2e.helpers import sign_in
from tests.factories import AnnouncementFactory, NotificationFactory, NotificationTypeFactory, UserFactory

pytestmark = pytest.mark.e2e


def _member(live_server, titles, **row):
    """Commit a member with one notification per title (the first title newest) and return their e-mail."""
    with live_server.app_context():
        user = UserFactory(timezone="Asia/Tokyo")
        NotificationTypeFactory(type="comment")
        now = datetime.now(UTC)
        for age, title in enumerate(titles):
            NotificationFactory(
                user_id=user.id, type="comment", title=title, created_at=now - timedelta(minutes=5 + age), **row
            )
        db.session.commit()
        email = user.email
        db.session.remove()
    return email


def _sign_in(page, email: str) -> None:
    sign_in(page, email)


def _row(page, title):
    return page.locator("li.item", has_text=title)


def test_open_a_notification_marks_it_read_and_drops_the_badge(page, live_server):
    _sign_in(page, _member(live_server, ["Alpha", "Beta", "Gamma"], link_path="/inbox?filter=all"))
    badge = page.locator("#inbox-badge")
    expect(badge).to_have_text("3")
    expect(_row(page, "Beta")).to_have_class(re.compile(r"item--unread"))
    expect(_row(page, "Beta").locator("time")).to_have_text("6 minutes ago")  # Babel/Intl wording (issue 17)
    expect(_row(page, "Beta").locator("time")).to_have_attribute("title", re.compile(r"JST$"))

    page.get_by_role("button", name="Beta", exact=True).click()
    expect(page).to_have_url(re.compile(r"/inbox\?filter=all$"))
    expect(_row(page, "Beta")).not_to_have_class(re.compile(r"item--unread"))
    expect(badge).to_have_text("2")

    _row(page, "Alpha").get_by_role("button", name=re.compile(r"^Mark read")).click()
    expect(_row(page, "Alpha")).not_to_have_class(re.compile(r"item--unread"))
    expect(badge).to_have_text("1")
    expect(page.locator("#inbox-status")).to_have_text("Marked “Alpha” read.")


def test_load_more_appends_the_next_page_in_place(page, live_server):
    _sign_in(page, _member(live_server, [f"Item {n:02d}" for n in range(25)]))
    rows = page.locator("#notification-list > li")
    expect(rows).to_have_count(20)
    page.get_by_role("link", name="Load more").click()
    expect(rows).to_have_count(25)
    expect(rows.last).to_contain_text("Item 24")
    expect(page.get_by_text("That's everything.")).to_be_visible()
    expect(page.get_by_role("link", name="Load more")).to_have_count(0)
    expect(page).to_have_url(re.compile(r"/inbox$"))
    expect(page.locator("li[data-first-new]")).to_have_count(0)
    expect(_row(page, "Item 20")).to_be_focused()


def test_mark_all_read_empties_the_badge(page, live_server):
    email = _member(live_server, ["One", "Two"])
    with live_server.app_context():
        AnnouncementFactory(title="Everyone, read me")
        db.session.commit()
        db.session.remove()
    _sign_in(page, email)
    expect(page.locator("#inbox-badge")).to_have_text("3")
    page.get_by_role("button", name="Mark all read").click()
    expect(page.locator("#inbox-badge")).to_have_text("")
    expect(page.locator("#inbox-badge")).to_be_hidden()
    expect(page.locator(".item--unread")).to_have_count(0)
    page.reload()
    expect(page.locator("#inbox-badge")).to_have_text("")
    expect(page.locator(".item--unread")).to_have_count(0)


def test_archive_then_find_it_under_archived(page, live_server):
    _sign_in(page, _member(live_server, ["Keep me", "File me away"]))
    _row(page, "File me away").get_by_role("button", name=re.compile(r"^Archive")).click()
    expect(_row(page, "File me away")).to_have_class(re.compile(r"item--archived"))
    expect(page.locator("#inbox-badge")).to_have_text("1")
    page.reload()
    expect(_row(page, "File me away")).to_have_count(0)
    page.get_by_role("link", name="Archived").click()
    expect(page).to_have_url(re.compile(r"filter=archived"))
    expect(_row(page, "File me away")).to_be_visible()
    expect(_row(page, "Keep me")).to_have_count(0)


def test_a_hostile_title_renders_as_text_and_opens_no_dialog(page, live_server):
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    title = "<img src=x onerror=alert(1)>"
    _sign_in(page, _member(live_server, [title]))
    expect(page.get_by_text(title, exact=True)).to_be_visible()
    expect(page.locator("#notification-list img")).to_have_count(0)
    _row(page, title).get_by_role("button", name=re.compile(r"^Mark read")).click()  # the fragment path too
    expect(page.locator("#inbox-badge")).to_have_text("")
    expect(page.get_by_text(title, exact=True)).to_be_visible()
    page.wait_for_timeout(300)
    assert dialogs == []


def test_inbox_works_without_javascript(browser, live_server):
    context = browser.new_context(java_script_enabled=False, base_url=live_server.base_url)
    page = context.new_page()
    try:
        sign_in(page, _member(live_server, ["No script here", "Second"]), scripts=False)
        expect(page.locator("#inbox-badge")).to_have_text("2")
        _row(page, "No script here").get_by_role("button", name=re.compile(r"^Mark read")).click()
        expect(page).to_have_url(re.compile(r"/inbox\?filter=all$"))
        expect(_row(page, "No script here")).not_to_have_class(re.compile(r"item--unread"))
        expect(page.locator("#inbox-badge")).to_have_text("1")
    finally:
        context.close()
