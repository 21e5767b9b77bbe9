"""The header badge updates live in every tab, follows mark-read, and survives a server restart."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.extensions import db, redis
from app.live import nodestats, seen
from app.live.presence import online_user_ids
from app.realtime.hub import hub_for
from tests.e2e.helpers import open_inbox
from tests.factories import TEST_PASSWORD, UserFactory
from tests.realtime.helpers import Gunicorn, api_notify, create_api_key, insert_notification, session_cookie
from tests.support.waiting import free_port, wait_for

pytestmark = pytest.mark.e2e

HOSTILE_TITLE = '<img src=x onerror="document.title=1"> Build #42 failed'


@pytest.fixture
def member(live_server):
    """A user with two unread notifications; returns (user id, e-mail, external id)."""
    with live_server.app_context():
        user = UserFactory(display_name="Tab Tester")
        db.session.commit()
        for n in range(2):
            insert_notification(user.id, title=f"Old news {n}", key=f"e2e-old-{n}")
        member = (user.id, user.email, user.external_id)
        db.session.remove()
    return member


def test_two_tabs_follow_an_api_call_and_a_mark_read(page, live_server, member):
    _, email, external_id = member
    key = create_api_key(live_server)
    page.goto("/login")
    page.get_by_label("E-mail").fill(email)
    page.get_by_label("Password").fill(TEST_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/inbox$"))
    open_inbox(page, live_server.base_url + "/inbox")
    other = page.context.new_page()
    open_inbox(other, live_server.base_url + "/inbox")
    tabs = (page, other)
    for tab in tabs:
        expect(tab.locator("#inbox-badge")).to_have_text("2")

    api_notify(live_server.base_url, key, external_id, HOSTILE_TITLE)
    for tab in tabs:
        expect(tab.locator("#inbox-badge")).to_have_text("3", timeout=1000)
        toast = tab.locator("#toasts [data-toast]")
        expect(toast).to_contain_text(HOSTILE_TITLE, timeout=1000)  # shown as text, not markup
        expect(tab.locator("#toasts img")).to_have_count(0)
        assert tab.evaluate("window.__sameDocument") is True  # no reload
    expect(page.locator("#toasts")).to_have_attribute("aria-live", "polite")

    page.get_by_role("button", name="Mark read: Old news 0").click()
    expect(page.locator("#inbox-badge")).to_have_text("2", timeout=1000)
    expect(other.locator("#inbox-badge")).to_have_text("2", timeout=1000)
    assert other.evaluate("window.__sameDocument") is True

    expect(page.locator("#toasts [data-toast]")).to_have_count(1)
    page.locator("#toasts [data-toast-close]").click()
    expect(page.locator("#toasts [data-toast]")).to_have_count(0)


def test_a_toast_shown_in_a_real_browser_is_acked(page, live_server, member):
    """realtime.js acks each frame after htmx swapped it in: the server records the notification as seen in the
    tab (what push_when_offline asks), times it from the 202, and counts the member online."""
    user_id, _, external_id = member
    key = create_api_key(live_server)
    page.context.add_cookies(
        [{"name": "session", "value": session_cookie(live_server, user_id), "url": live_server.base_url}]
    )
    open_inbox(page, live_server.base_url + "/inbox")
    expect(page.locator("#inbox-badge")).to_have_text("2")
    hub = hub_for(live_server)
    before = _node_counts(live_server, hub)
    notification_id = api_notify(live_server.base_url, key, external_id, "Acked in the browser")["results"][0][
        "notification_id"
    ]
    expect(page.locator("#toasts [data-toast]")).to_contain_text("Acked in the browser")
    with live_server.app_context():
        client = redis.realtime()
        wait_for(lambda: seen.acked(client, [(user_id, notification_id)]), 5, "the toast's ack")
        assert online_user_ids([user_id]) == {user_id}
    after = _node_counts(live_server, hub)
    counted = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    assert counted["acks"] >= 1 and counted["ack_count"] >= 1  # one 202-to-ack time observed
    assert counted.get("unacked", 0) == 0 and counted.get("resends", 0) == 0


def _node_counts(live_server, hub) -> dict[str, float]:
    """The node's counters as /metrics reads them (flushed to Redis now)."""
    hub.flush_stats()
    with live_server.app_context():
        return nodestats.read(redis.realtime(), [hub.node_id]).get(hub.node_id, {})


def test_after_a_server_restart_the_page_reconnects_with_the_right_count(page, app, member):
    user_id, _, _ = member
    port = free_port()
    server = Gunicorn(port).start()
    try:
        page.context.add_cookies([{"name": "session", "value": session_cookie(app, user_id), "url": server.base_url}])
        open_inbox(page, server.base_url + "/inbox")
        badge = page.locator("#inbox-badge")
        expect(badge).to_have_text("2")

        assert server.stop() == 0  # SIGTERM: sockets closed with 1001
        with app.app_context():
            for n in range(3):
                insert_notification(user_id, title=f"While down {n}", key=f"e2e-down-{n}")
        server = Gunicorn(port).start()

        expect(badge).to_have_text("5", timeout=20_000)
        assert page.evaluate("window.__sameDocument") is True  # the socket reconnected; no reload
    finally:
        server.kill()
