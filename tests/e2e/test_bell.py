"""The embeddable bell on the demo host page, an origin other than Hato's (issue 19).

The host page and its token endpoint are app/devstack/demo_host.py, served on a free port of its own;
Hato is the live server. The bell must show the count, list a new notification live, keep the host page
and an open Hato inbox tab in step on mark read / delete (and its undo) / mark all read / archive all, refresh
its token without a reload, pass axe with its popover open, and never open more than 5 sockets a minute however
its tokens fail.
"""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect
from werkzeug.serving import make_server

from app.devstack.demo_host import create_host
from app.extensions import db
from tests.e2e.helpers import open_inbox
from tests.factories import UserFactory
from tests.realtime.helpers import api_notify, create_api_key, insert_notification, session_cookie
from tests.support.axe import describe, serious_violations
from tests.support.waiting import free_port

pytestmark = pytest.mark.e2e


@pytest.fixture
def member(live_server):
    """A member with two unread notifications; returns (user id, external id)."""
    with live_server.app_context():
        user = UserFactory(display_name="Bell Tester")
        db.session.commit()
        for n in range(2):
            insert_notification(user.id, title=f"Bell news {n}", key=f"bell-{user.id}-{n}")
        found = (user.id, user.external_id)
        db.session.remove()
    return found


@pytest.fixture
def host(live_server, member, monkeypatch):
    """The demo host page on its own origin, allowed by Hato, minting for the member; yields its app."""
    from app.api_keys.service import create_api_key as create

    with live_server.app_context():
        key = create(None, "bell e2e", ["feed:issue"])
        db.session.commit()
        db.session.remove()
    port = free_port()
    host_app = create_host(live_server.base_url, key, user=member[1])
    host_app.base_url = f"http://127.0.0.1:{port}"
    monkeypatch.setitem(live_server.config, "FEED_ALLOWED_ORIGINS", [host_app.base_url])
    server = make_server("127.0.0.1", port, host_app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield host_app
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def bell(page):
    return page.locator("hato-bell")


def open_host(page, host_app, sockets: list | None = None, query: str = "") -> None:
    # Shown on failure (pytest captures output): the bell's errors and the host's and Hato's answers.
    page.on("console", lambda message: print("console:", message.type, message.text))
    page.on("pageerror", lambda error: print("page error:", error))
    page.on("response", lambda response: print("response:", response.status, response.url))
    if sockets is not None:
        page.on("websocket", lambda ws: sockets.append((time.monotonic(), ws.url)))
    page.goto(host_app.base_url + "/" + query)
    page.evaluate("window.__sameDocument = true")


def test_count_live_popover_and_both_pages_in_step(page, live_server, member, host):
    user_id, external_id = member
    open_host(page, host)
    expect(bell(page)).to_have_attribute("count", "2", timeout=5000)
    expect(page.locator("#host-count")).to_have_text("2")
    button = page.get_by_role("button", name="Notifications, 2 unread")
    expect(button).to_be_visible()

    inbox = page.context.new_page()
    inbox.context.add_cookies(
        [{"name": "session", "value": session_cookie(live_server, user_id), "url": live_server.base_url}]
    )
    open_inbox(inbox, live_server.base_url + "/inbox")
    expect(inbox.locator("#inbox-badge")).to_have_text("2")

    button.click()
    expect(button).to_have_attribute("aria-expanded", "true")
    dialog = page.get_by_role("dialog", name="Notifications")
    expect(dialog.get_by_text("Bell news 1")).to_be_visible()

    api_notify(live_server.base_url, create_api_key(live_server), external_id, "Fresh from the API")
    expect(dialog.get_by_text("Fresh from the API")).to_be_visible(timeout=3000)
    expect(bell(page)).to_have_attribute("count", "3", timeout=3000)
    expect(inbox.locator("#inbox-badge")).to_have_text("3", timeout=3000)

    found = serious_violations(page)  # the host page with the popover open
    assert not found, describe(found)

    dialog.get_by_role("button", name="Mark read: Fresh from the API").click()
    expect(bell(page)).to_have_attribute("count", "2", timeout=3000)
    expect(page.locator("#host-count")).to_have_text("2")
    expect(inbox.locator("#inbox-badge")).to_have_text("2", timeout=3000)

    # Bulk actions (issue 33): Delete a row, Undo it in the footer; Archive all (after Mark all read) empties the list.
    dialog.get_by_role("button", name="Delete: Bell news 1").click()
    expect(bell(page)).to_have_attribute("count", "1", timeout=3000)
    expect(dialog.get_by_text("Bell news 1")).to_have_count(0)
    dialog.get_by_role("button", name="Undo").click()
    expect(bell(page)).to_have_attribute("count", "2", timeout=3000)
    expect(dialog.get_by_text("Bell news 1")).to_be_visible()

    dialog.get_by_role("button", name="Mark all read").click()
    expect(bell(page)).to_have_attribute("count", "0", timeout=3000)
    expect(page.locator("#host-count")).to_have_text("0")
    expect(inbox.locator("#inbox-badge")).to_have_attribute("data-count", "0", timeout=3000)
    expect(page.get_by_role("button", name="Notifications, none unread")).to_be_visible()
    dialog.get_by_role("button", name="Archive all").click()
    expect(dialog.get_by_text("You're all caught up.")).to_be_visible(timeout=3000)

    page.keyboard.press("Escape")
    expect(button.or_(page.get_by_role("button", name="Notifications, none unread"))).to_be_focused()
    expect(dialog).to_be_hidden()
    assert page.evaluate("window.__sameDocument") is True


def test_japanese_from_the_pages_lang_and_dark_theme_pass_axe(page, member, host):
    page.emulate_media(color_scheme="dark")
    open_host(page, host, query="?lang=ja")
    expect(bell(page)).to_have_attribute("count", "2", timeout=5000)
    page.get_by_role("button", name="お知らせ、未読 2 件").click()
    dialog = page.get_by_role("dialog", name="お知らせ")
    expect(dialog.get_by_role("button", name="すべて既読にする")).to_be_visible()
    expect(dialog.get_by_text("Bell news 0")).to_be_visible()
    found = serious_violations(page)
    assert not found, describe(found)


def test_an_expiring_token_is_refreshed_without_a_reload_or_a_new_socket(page, live_server, member, host):
    _, external_id = member
    host.config["TOKEN_TTL"] = 6  # signed by the host itself (under 60 s), refreshed about every 5 s
    sockets: list = []
    open_host(page, host, sockets)
    expect(bell(page)).to_have_attribute("count", "2", timeout=5000)
    page.wait_for_timeout(14_000)  # past two expiries
    assert host.config["TOKENS_ISSUED"] >= 3
    api_notify(live_server.base_url, create_api_key(live_server), external_id, "After the refresh")
    expect(bell(page)).to_have_attribute("count", "3", timeout=3000)  # the same socket, still live
    assert len(sockets) == 1, sockets
    assert page.evaluate("window.__sameDocument") is True


@pytest.mark.parametrize("mode", ["refused", "fail"])
def test_a_failing_token_loop_opens_at_most_5_sockets_a_minute(page, member, host, mode):
    host.config["MINT_MODE"] = mode
    sockets: list = []
    page.clock.install()  # the bell's timers run on a fake clock: three minutes pass in seconds
    open_host(page, host, sockets)
    for _ in range(180):
        page.clock.run_for(1000)
        page.wait_for_timeout(15)  # let a socket open and be refused for real
    opened = [at for at, _ in sockets]
    assert len(opened) <= 3 * 5, opened
    # Fake minutes passed at ≥ 1 s per 15 ms of real time, so any 5 opens are ≥ a fake minute apart:
    # check it in the bell's own record (its clock) rather than in real time.
    stamps = page.evaluate("document.querySelector('hato-bell')._opens.slice()")
    assert len(stamps) <= 5
    if mode == "refused":
        assert sockets, "the refused tokens should still have opened a socket"
    else:
        assert not sockets  # no token, no socket


def test_no_token_request_leaks_into_a_url(page, member, host):
    urls: list = []
    page.on("request", lambda request: urls.append(request.url))
    page.on("websocket", lambda ws: urls.append(ws.url))
    open_host(page, host)
    expect(bell(page)).to_have_attribute("count", "2", timeout=5000)
    assert not [url for url in urls if "token=" in url or "eyJ" in url], urls


def test_another_page_of_an_origin_not_allowed_gets_nothing(page, live_server, member, host, monkeypatch):
    monkeypatch.setitem(live_server.config, "FEED_ALLOWED_ORIGINS", ["https://someone-else.example"])
    open_host(page, host)
    page.wait_for_timeout(1500)
    assert bell(page).get_attribute("count") is None
    with live_server.app_context():
        unread = db.session.execute(
            sa.text("SELECT count(*) FROM notifications WHERE user_id = :u AND read_at IS NULL"), {"u": member[0]}
        ).scalar()
        db.session.remove()
    assert unread == 2
