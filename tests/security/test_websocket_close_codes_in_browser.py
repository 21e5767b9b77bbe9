"""Issue 14 items 8 and 15 in the browser: realtime.js stays closed after 4001/4008 and reconnects after 1001.

The page is served by a real gunicorn process (Werkzeug's dev server ends the TCP connection right
after the close frame, and Chromium then reports 1006 whatever the code was).

A tab whose session was signed out (in another tab, or by "sign out everywhere" from another
browser) must show that it is signed out and must not hammer /ws; a tab closed for being over the
socket cap must stay quiet; a tab closed by a server going away (1001) must come back by itself.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.extensions import db
from app.live.publish import publish_badge
from tests.e2e.helpers import wait_for_htmx
from tests.factories import UserFactory
from tests.realtime.helpers import Gunicorn, close_quietly, connect, insert_notification, session_cookie
from tests.support.waiting import free_port

pytestmark = pytest.mark.e2e

# Records every socket the page opens and every close code htmx's ws extension reports.
RECORDER = """
window.__closes = [];
window.__opened = 0;
const NativeWebSocket = window.WebSocket;
window.WebSocket = function (url, protocols) {
  window.__opened += 1;
  return protocols === undefined ? new NativeWebSocket(url) : new NativeWebSocket(url, protocols);
};
window.WebSocket.prototype = NativeWebSocket.prototype;
Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
document.addEventListener("htmx:wsClose", (evt) => window.__closes.push(evt.detail.event.code));
"""


@pytest.fixture(scope="module")
def server(app, tmp_path_factory):
    """One real gunicorn web process on the test database and Redis."""
    process = Gunicorn(free_port(), log_path=tmp_path_factory.mktemp("gunicorn") / "web.log").start()
    yield process
    process.stop()


@pytest.fixture
def member(app):
    with app.app_context():
        user = UserFactory(display_name="Close Codes")
        db.session.commit()
        user_id = user.id
        db.session.remove()
    return user_id


def signed_in_context(browser, app, server, user_id: int):
    """A browser (context) holding its own signed-in session for user_id."""
    context = browser.new_context()
    context.add_cookies([{"name": "session", "value": session_cookie(app, user_id), "url": server.base_url}])
    return context


def open_tab(context, url: str):
    page = context.new_page()
    page.add_init_script(RECORDER)
    page.goto(url)
    wait_for_htmx(page)
    page.wait_for_function("() => window.__opened >= 1")
    expect(page.locator("#inbox-badge")).to_be_attached()
    return page


def wait_live(tab, app, user_id: int, count: int) -> None:
    """A badge event reaches the tab: its socket is open and counted."""
    with app.app_context():
        insert_notification(user_id, title=f"Live {count}", key=f"close-codes-{count}")
        publish_badge([user_id])
        db.session.remove()
    expect(tab.locator("#inbox-badge")).to_have_text(str(count), timeout=5000)


def test_signing_out_in_another_tab_shows_signed_out_and_never_reconnects(browser, app, server, member):
    context = signed_in_context(browser, app, server, member)
    try:
        tab = open_tab(context, server.base_url + "/inbox")
        other = open_tab(context, server.base_url + "/inbox")
        wait_live(tab, app, member, 1)

        other.get_by_role("button", name="Sign out").click()
        expect(other).to_have_url(re.compile(r"/login$"))

        tab.wait_for_function("() => window.__closes.length > 0")
        assert tab.evaluate("window.__closes") == [4001]
        expect(tab.locator("#signed-out")).to_contain_text("You have been signed out")
        link = tab.get_by_role("link", name="Sign in again")
        expect(link).to_have_attribute("href", re.compile(r"^/login\?next=%2Finbox"))
        tab.wait_for_timeout(3000)  # the ws extension's and realtime.js's retries would have fired by now
        assert tab.evaluate("window.__opened") == 1
        assert tab.evaluate("window.__closes") == [4001]
    finally:
        context.close()


def test_sign_out_everywhere_from_another_browser_signs_this_tab_out(browser, app, server, member):
    victim = signed_in_context(browser, app, server, member)
    phone = signed_in_context(browser, app, server, member)
    try:
        tab = open_tab(victim, server.base_url + "/inbox")
        wait_live(tab, app, member, 1)
        page = phone.new_page()
        page.goto(server.base_url + "/account/sign-ins")
        page.get_by_role("button", name="Sign out everywhere else").click()
        expect(page.locator("p.alert[role=status]")).to_contain_text("This browser stays signed in")

        tab.wait_for_function("() => window.__closes.length > 0")
        expect(tab.locator("#signed-out")).to_contain_text("You have been signed out")
        tab.wait_for_timeout(3000)
        assert tab.evaluate("window.__closes") == [4001]
        assert tab.evaluate("window.__opened") == 1
        tab.reload()
        expect(tab).to_have_url(re.compile(r"/login"))
        page.goto(server.base_url + "/inbox")
        expect(page).to_have_url(re.compile(r"/inbox$"))
    finally:
        victim.close()
        phone.close()


def test_over_the_cap_4008_stays_closed_without_a_signed_out_notice(browser, app, server, member):
    context = signed_in_context(browser, app, server, member)
    flood = []
    try:
        tab = open_tab(context, server.base_url + "/inbox")
        wait_live(tab, app, member, 1)
        cookie = session_cookie(app, member)
        flood = [connect(server.base_url, cookie) for _ in range(8)]  # the tab's is now the oldest of nine

        tab.wait_for_function("() => window.__closes.length > 0")
        tab.wait_for_timeout(3000)
        assert tab.evaluate("window.__closes") == [4008]
        assert tab.evaluate("window.__opened") == 1
        expect(tab.locator("#signed-out")).to_have_count(0)
    finally:
        for ws in flood:
            close_quietly(ws)
        context.close()


def test_going_away_1001_reconnects_and_stays_live(browser, app, server, member):
    """ "Sign out everywhere else" from this browser: its other tabs get 1001 and come back re-stamped."""
    context = signed_in_context(browser, app, server, member)
    try:
        tab = open_tab(context, server.base_url + "/inbox")
        wait_live(tab, app, member, 1)
        other = context.new_page()
        other.goto(server.base_url + "/account/sign-ins")
        other.get_by_role("button", name="Sign out everywhere else").click()
        expect(other.locator("p.alert[role=status]")).to_contain_text("This browser stays signed in")

        tab.wait_for_function("() => window.__opened >= 2", timeout=10_000)
        wait_live(tab, app, member, 2)
        assert tab.evaluate("window.__closes") == [1001]
        expect(tab.locator("#signed-out")).to_have_count(0)
    finally:
        context.close()
