"""Japanese and English in a real browser, with a real worker, sweeper and SMTP sink (issue 17).

A Japanese member (locale ja, Asia/Tokyo) reads the inbox and preferences in Japanese with JST times, gets
a Japanese toast and a Japanese e-mail when a notification arrives, then switches to English on the
preferences page: the next page, the live frames and the next e-mail are English, without a restart.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from playwright.sync_api import Page, expect

from app.extensions import db
from app.notify.service import notify
from app.unitofwork import commit
from tests.e2e.helpers import open_inbox, sign_in, wait_for_htmx
from tests.factories import NotificationFactory, NotificationTypeFactory, UserFactory
from tests.realtime.helpers import Gunicorn, session_cookie
from tests.support.waiting import free_port, wait_for

pytestmark = pytest.mark.e2e

JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
EMAIL = "hanako@example.com"


@pytest.fixture
def hanako(live_server) -> int:
    """A member who chose Japanese and lives in Tokyo, with one notification from 00:05 UTC (09:05 JST)."""
    with live_server.app_context():
        NotificationTypeFactory(type="mention", label="Mentions", default_email=True)
        user = UserFactory(email=EMAIL, display_name="Hanako", locale="ja", timezone="Asia/Tokyo")
        db.session.flush()
        NotificationFactory(user_id=user.id, type="mention", title="Quarterly report",
                            created_at=datetime(2026, 11, 30, 0, 5, tzinfo=UTC))  # fmt: skip
        db.session.commit()
        user_id = user.id
        db.session.remove()
    return user_id


def _notify(live_server, user_id: int, title: str, key: str) -> None:
    """A `mention` as the API sends it (jobs and badge events follow the commit)."""
    with live_server.app_context():
        notify([user_id], by="user_id", type_="mention", title=title, body="You were mentioned.", dedupe_key=key)
        commit().wait()
        db.session.remove()


def _visible_text(page: Page) -> str:
    return page.locator("body").inner_text()


def test_japanese_everywhere_then_english_without_a_restart(page, live_server, workers, sink, hanako, push_configured):
    # Signing in: the browser asks for English, so the form is English; the inbox is the saved language.
    sign_in(page, EMAIL)
    open_inbox(page, live_server.base_url + "/inbox")
    expect(page.locator("html")).to_have_attribute("lang", "ja")
    expect(page.locator("h1.page-title")).to_have_text("受信箱")
    expect(page.get_by_role("button", name="すべて既読にする")).to_be_visible()
    expect(page.get_by_role("navigation", name="メイン").get_by_role("link", name="通知設定")).to_be_visible()
    expect(page.locator("#notification-list time").first).to_have_attribute("title", "2026年11月30日(月) 9:05 JST")
    expect(page.get_by_role("button", name="既読にする：Quarterly report")).to_be_visible()
    expect(page.locator("#inbox-badge")).to_have_attribute("aria-label", "未読 1 件")

    # A new notification: a Japanese toast, and a Japanese e-mail at the sink.
    _notify(live_server, hanako, "Design review", "lang-1")
    toast = page.locator("#toasts [data-toast]")
    expect(toast).to_contain_text("新しい通知：", timeout=5000)
    expect(toast).to_contain_text("Design review")
    expect(page.locator("#toasts [data-toast-close]")).to_have_attribute("aria-label", "閉じる")
    expect(page.locator("#inbox-badge")).to_have_attribute("aria-label", "未読 2 件")
    wait_for(lambda: len(sink[1].messages) >= 1, 30, "the Japanese e-mail")
    first = sink[1].messages[0].message
    assert first["Subject"] == "Design review"
    assert "Mentionsのメールの配信停止：" in first.get_body(("plain",)).get_content()
    html = first.get_body(("html",)).get_content()
    assert '<html lang="ja">' in html and "Mentionsのメールを配信停止する" in html

    # Preferences in Japanese, with the language setting.
    page.get_by_role("navigation", name="メイン").get_by_role("link", name="通知設定").click()
    wait_for_htmx(page)
    expect(page.locator("h1.page-title")).to_have_text("通知設定")
    expect(page.get_by_role("switch", name="プッシュ通知：Mentions")).to_be_visible()
    expect(page.locator("#push [data-push-status]")).to_have_text(re.compile(r"プッシュ通知"))
    language = page.locator("#locale")
    expect(language).to_have_value("ja")

    # Switch to English: the whole page reloads in English, without a restart.
    language.select_option("en")
    page.get_by_role("button", name="言語を保存").click()
    expect(page).to_have_url(re.compile(r"/preferences\?saved=language#language$"))
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.locator("h1.page-title")).to_have_text("Preferences")
    expect(page.locator("#language .alert--success")).to_have_text("Saved. Hato now speaks English to you.")
    expect(page.get_by_role("switch", name="Push: Mentions")).to_be_visible()
    assert not JAPANESE.search(_visible_text(page).replace("日本語", "")), "Japanese left on the English page"

    open_inbox(page, live_server.base_url + "/inbox")
    expect(page.locator("h1.page-title")).to_have_text("Inbox")
    expect(page.locator("#notification-list time").last).to_have_attribute(
        "title",
        re.compile(r"^Mon, Nov 30, 2026, 9:05\sAM JST$"),  # CLDR puts a narrow no-break space before AM
    )
    assert not JAPANESE.search(_visible_text(page)), "Japanese left on the English inbox"

    # The live socket reconnected with the page, so its frames are English now; so is the next e-mail.
    _notify(live_server, hanako, "Second review", "lang-2")
    expect(page.locator("#toasts [data-toast]").last).to_contain_text("New notification:", timeout=5000)
    expect(page.locator("#inbox-badge")).to_have_attribute("aria-label", "3 unread")
    wait_for(lambda: len(sink[1].messages) >= 2, 30, "the English e-mail")
    second = sink[1].messages[1].message
    assert "Unsubscribe from Mentions e-mails:" in second.get_body(("plain",)).get_content()
    with live_server.app_context():
        saved = db.session.execute(sa.text("SELECT locale FROM users WHERE id = :id"), {"id": hanako}).scalar_one()
        db.session.remove()
    assert saved == "en"


def test_the_signed_out_notice_is_in_japanese(browser, app, hanako, tmp_path):
    # A real gunicorn process: Werkzeug's dev server ends the TCP connection right after the close frame,
    # and Chromium then reports 1006 instead of 4001 (see tests/security/test_websocket_close_codes_in_browser.py).
    server = Gunicorn(free_port(), log_path=tmp_path / "web.log").start()
    context = browser.new_context()
    try:
        context.add_cookies([{"name": "session", "value": session_cookie(app, hanako), "url": server.base_url}])
        tab = context.new_page()
        open_inbox(tab, server.base_url + "/inbox")
        wait_for_htmx(tab)
        other = context.new_page()
        other.goto(server.base_url + "/inbox")
        wait_for_htmx(other)
        other.get_by_role("button", name="ログアウト").click()
        notice = tab.locator("#signed-out")
        expect(notice).to_contain_text("ログアウトされました。", timeout=5000)
        expect(notice.get_by_role("link", name="もう一度ログイン")).to_have_attribute(
            "href", re.compile(r"^/login\?next=%2Finbox")
        )
    finally:
        context.close()
        server.stop()
