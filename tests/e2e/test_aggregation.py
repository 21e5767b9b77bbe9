"""Aggregation in a real browser: three likes make one live row "… and 2 others …"; a fourth re-surfaces it.

The list refreshes in place when a frame with a toast arrives and focus is outside the list; with
keyboard focus inside it, a polite "New notifications — Show" button appears instead and focus stays.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from app.extensions import db
from tests.e2e.helpers import sign_in
from tests.factories import NotificationTypeFactory, UserFactory
from tests.realtime.helpers import api_notify, create_api_key

pytestmark = pytest.mark.e2e


@pytest.fixture
def author(live_server):
    """A member and the `like` type (aggregated over 5 minutes); returns (e-mail, external id)."""
    with live_server.app_context():
        NotificationTypeFactory(type="like", label="Likes", aggregation_window=300)
        NotificationTypeFactory(type="comment", label="Comments")
        user = UserFactory()
        db.session.commit()
        author = (user.email, user.external_id)
        db.session.remove()
    return author


def like(base_url: str, key: str, external_id: str, name: str) -> dict:
    return api_notify(
        base_url,
        key,
        external_id,
        "liked your post",
        type="like",
        group_key="post:7",
        dedupe_key=f"like:{name}",
        actor={"id": name.lower(), "name": name},
    )


def wait_for_socket(page, frames: list, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not frames:
        assert time.monotonic() < deadline, "no websocket frame arrived"
        page.wait_for_timeout(50)


def test_three_likes_one_live_row_then_a_fourth_makes_it_unread_on_top(page, live_server, author):
    email, external_id = author
    key = create_api_key(live_server)
    frames: list = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(payload)))
    sign_in(page, email)
    wait_for_socket(page, frames)
    page.evaluate("window.__sameDocument = true")
    badge = page.locator("#inbox-badge")
    rows = page.locator("#notification-list li.item")

    for name in ("Alice", "Bob", "Carol"):
        like(live_server.base_url, key, external_id, name)

    # Live, no reload: one row naming the first actor and the others, and the badge at 1.
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Alice and 2 others")
    expect(badge).to_have_text("1")
    expect(page.locator("#inbox-status")).to_have_text("New notifications arrived.")
    assert page.evaluate("window.__sameDocument") is True

    # Read it (keyboard focus stays in the list), then another notification arrives on top.
    rows.first.get_by_role("button", name=re.compile("Mark read")).click()
    expect(badge).to_have_text("")
    expect(rows.first).not_to_have_class(re.compile(r"item--unread"))
    focused = page.evaluate("document.activeElement.id")
    assert focused.startswith("notification-")
    api_notify(live_server.base_url, key, external_id, "Other news", type="comment")
    show = page.get_by_role("button", name="New notifications — Show")
    expect(show).to_be_visible()  # focus is in the list: offered, not forced
    assert page.evaluate("document.activeElement.id") == focused
    show.click()
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("Other news")

    # The fourth like: the same row, unread again and back on top; still two rows, badge 2.
    page.evaluate("document.activeElement.blur()")
    like(live_server.base_url, key, external_id, "Dave")
    expect(rows.first).to_contain_text("Alice and 3 others")
    expect(rows.first).to_have_class(re.compile(r"item--unread"))
    expect(rows).to_have_count(2)
    expect(badge).to_have_text("2")
    assert page.evaluate("window.__sameDocument") is True


def test_a_scheduled_notification_row_appears_at_send_at_without_a_reload(page, live_server, author, processes):
    from datetime import UTC, datetime, timedelta

    email, external_id = author
    key = create_api_key(live_server)
    processes("sweep", SCHEDULER_INTERVAL_SECONDS=0.2)
    frames: list = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(payload)))
    sign_in(page, email)
    wait_for_socket(page, frames)
    page.evaluate("window.__sameDocument = true")
    send_at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    answer = api_notify(live_server.base_url, key, external_id, "Your report is ready", send_at=send_at.isoformat())
    assert answer["status"] == "scheduled"

    rows = page.locator("#notification-list li.item")
    expect(rows.first).to_contain_text("Your report is ready", timeout=10_000)
    expect(rows.first).to_have_class(re.compile(r"item--unread"))
    assert page.evaluate("window.__sameDocument") is True
