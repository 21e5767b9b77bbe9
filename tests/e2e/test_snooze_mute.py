"""Snooze and mute in a real browser, with the live badge following and a real sweeper process.

1. Snooze from a row's menu: the row leaves, focus moves to the next row, the badge drops; Unsnooze in
   the Snoozed view brings it back; a short snooze is woken by the sweeper live (badge up, toast).
2. Mute a thread: a new notification on it (POST /v1/notifications with its group_key) changes
   nothing on the page, one on another thread does; the preferences page lists and unmutes it.
"""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.extensions import db
from tests.e2e.helpers import sign_in
from tests.factories import NotificationTypeFactory, UserFactory
from tests.realtime.helpers import api_notify, create_api_key

pytestmark = pytest.mark.e2e


@pytest.fixture
def sweeper(processes):
    """A real sweeper process every 0.2 s against the live server's database and Redis."""
    return processes("sweep", SWEEP_INTERVAL_SECONDS=0.2)


@pytest.fixture
def member(live_server):
    """A member in Tokyo with two unread notifications (the newer first); returns (id, e-mail, external id)."""
    with live_server.app_context():
        NotificationTypeFactory(type="comment", label="Comment")
        user = UserFactory(timezone="Asia/Tokyo")
        for n, title in enumerate(["Older news", "Newer news"]):
            db.session.execute(
                sa.text(
                    "INSERT INTO notifications (user_id, type, title, body, dedupe_key, created_at)"
                    " VALUES (:u, 'comment', :t, 'Body', :k, now() - make_interval(mins => :m))"
                ),
                {"u": user.id, "t": title, "k": f"e2e-snooze-{n}", "m": 10 - n},
            )
        db.session.commit()
        member = (user.id, user.email, user.external_id)
        db.session.remove()
    return member


def open_inbox(page, email: str, seconds: float = 15) -> None:
    """Sign in and wait until the websocket has delivered its first (authoritative) count."""
    frames: list = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(payload)))
    sign_in(page, email)
    deadline = time.monotonic() + seconds
    while not frames:
        assert time.monotonic() < deadline, "no websocket frame arrived"
        page.wait_for_timeout(50)
    page.evaluate("window.__sameDocument = true")


def _titles(page) -> list[str]:
    return page.locator("#notification-list :is(.item__link, .item__label)").all_inner_texts()


def test_snooze_unsnooze_and_a_wake_by_the_sweeper_with_the_badge_following(page, live_server, member, sweeper):
    user_id, email, _ = member
    open_inbox(page, email)
    badge = page.locator("#inbox-badge")
    expect(badge).to_have_text("2")
    assert _titles(page) == ["Newer news", "Older news"]

    page.get_by_label("More actions: Newer news").click()
    page.get_by_role("button", name="Snooze for 1 hour: Newer news").click()
    expect(page.locator("#notification-list :is(.item__link, .item__label)")).to_have_count(1)
    expect(badge).to_have_text("1")
    expect(page.locator("#inbox-status")).to_contain_text("Snoozed “Newer news” until")
    expect(page.locator("#inbox-status")).to_contain_text("JST")
    # Focus went to the row that took its place, not back to the top of the page.
    older_id = page.locator("#notification-list li.item").get_attribute("id")
    expect(page.locator(f"#{older_id}")).to_be_focused()

    page.get_by_role("link", name="Snoozed").click()
    expect(page.locator("#notification-list :is(.item__link, .item__label)")).to_have_text(["Newer news"])
    expect(page.locator("#notification-list .item__meta")).to_contain_text("Snoozed until")
    page.get_by_role("button", name="Unsnooze: Newer news").click()
    expect(page.locator("#notification-list li.item")).to_have_count(0)
    expect(badge).to_have_text("2")
    page.get_by_role("link", name="All", exact=True).click()
    assert _titles(page) == ["Newer news", "Older news"]

    # A short snooze: the sweeper wakes it and the open page hears of it without a reload.
    page.evaluate("window.__sameDocument = true")
    page.get_by_label("More actions: Older news").click()
    page.get_by_role("button", name="Until tomorrow 9:00: Older news").click()
    expect(badge).to_have_text("1")
    with live_server.app_context():
        db.session.execute(
            sa.text(
                "UPDATE notifications SET snoozed_until = now() + interval '1 second' WHERE user_id = :u AND title = :t"
            ),
            {"u": user_id, "t": "Older news"},
        )
        db.session.commit()
        db.session.remove()
    expect(badge).to_have_text("2", timeout=10_000)
    expect(page.locator("#toasts [data-toast]")).to_contain_text("Back from snooze: Older news")
    assert page.evaluate("window.__sameDocument") is True
    page.reload()
    assert _titles(page) == ["Older news", "Newer news"]  # back on top, unread
    expect(page.locator("#notification-list li.item--unread")).to_have_count(2)


def test_a_refused_snooze_time_is_explained_in_place(page, live_server, member):
    _, email, _ = member
    sign_in(page, email)
    page.get_by_label("More actions: Newer news").click()
    field = page.get_by_label("Snooze until", exact=True).first
    field.fill("2020-01-01T09:00")
    # The browser's own min check would stop the form; the server must explain it too.
    field.evaluate("el => el.removeAttribute('min')")
    page.get_by_role("button", name="Snooze until the picked time: Newer news").click()
    error = page.locator("#notification-list .field__error")
    expect(error).to_have_text("That time has already passed. Pick a time in the future.")
    expect(page.locator("#notification-list [aria-invalid=true]")).to_be_focused()
    expect(page.locator("#inbox-badge")).to_have_text("2")


def test_mute_then_a_new_notification_on_that_thread_changes_nothing(page, live_server, member):
    _, email, external_id = member
    key = create_api_key(live_server)
    api_notify(live_server.base_url, key, external_id, "Reply on post 9", group_key="post:9", dedupe_key="p9-1")
    open_inbox(page, email)
    badge = page.locator("#inbox-badge")
    expect(badge).to_have_text("3")

    page.get_by_label("More actions: Reply on post 9").click()
    page.get_by_role("button", name="Mute this thread: Reply on post 9").click()
    expect(page.locator("#notification-list li", has_text="Reply on post 9")).to_contain_text("Thread muted")
    expect(badge).to_have_text("3")  # the thread's rows so far stay as they are

    api_notify(live_server.base_url, key, external_id, "Another reply on post 9", group_key="post:9", dedupe_key="p9-2")
    api_notify(live_server.base_url, key, external_id, "Something else", group_key="post:10", dedupe_key="p10-1")
    expect(badge).to_have_text("4")  # only the other thread's notification counts...
    toasts = page.locator("#toasts [data-toast]")
    expect(toasts).to_have_count(1)
    expect(toasts).to_contain_text("Something else")  # ...and only it is announced
    page.reload()
    assert "Another reply on post 9" not in _titles(page)
    expect(badge).to_have_text("4")

    page.get_by_role("link", name="Preferences").click()
    muted = page.locator("#muted")
    expect(muted.locator(".mute-list li")).to_have_count(1)
    expect(muted).to_contain_text("Reply on post 9")
    expect(muted).to_contain_text("post:9")
    muted.get_by_role("button", name="Unmute: Reply on post 9").click()
    expect(muted.locator(".mute-list li")).to_have_count(0)
    expect(muted.get_by_text("You have not muted any threads.")).to_be_visible()
    api_notify(live_server.base_url, key, external_id, "Third reply on post 9", group_key="post:9", dedupe_key="p9-3")
    expect(badge).to_have_text("5")
