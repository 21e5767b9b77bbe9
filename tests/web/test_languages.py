"""The end user's pages in Japanese and English (issue 17): the saved language, Accept-Language, switching."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import User
from tests.factories import NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.html import attrs, one, parse, texts

JA = {"Accept-Language": "ja"}
HTMX = {"HX-Request": "true"}


def _lang(html: str) -> str:
    return one(html, "html")["lang"]


@pytest.fixture
def japanese(login_as):
    """A signed-in member who chose Japanese and lives in Tokyo."""
    return login_as(UserFactory(locale="ja", timezone="Asia/Tokyo"))


def test_the_inbox_speaks_the_saved_language_with_jst_times(client, japanese):
    NotificationFactory(
        user_id=japanese.id, title="請求書が届きました", created_at=datetime(2026, 11, 30, 0, 5, tzinfo=UTC)
    )
    html = client.get("/inbox").get_data(as_text=True)
    assert _lang(html) == "ja"
    assert texts(html, "h1.page-title") == ["受信箱"]
    assert "すべて既読にする" in texts(html, ".page-actions button")
    assert texts(html, ".skip-link") == ["本文へ移動"]
    assert texts(html, ".tabs__tab") == ["すべて", "未読", "スヌーズ中", "アーカイブ済み"]
    when = one(html, "#notification-list time")
    assert when["title"] == "2026年11月30日(月) 9:05 JST"  # the reader's zone and language
    assert attrs(html, "#notification-list .item__actions button", "aria-label")[0] == "既読にする：請求書が届きました"
    assert one(html, "#inbox-badge")["aria-label"] == "未読 1 件"
    header = one(html, "header.site-header")
    assert header["data-signed-out-text"] == "ログアウトされました。" and header["data-sign-in-again-text"]


def test_english_stays_the_default_without_a_choice_or_a_header(client, login_as):
    login_as(UserFactory(locale=None))
    html = client.get("/inbox").get_data(as_text=True)
    assert _lang(html) == "en" and texts(html, "h1.page-title") == ["Inbox"]


def test_accept_language_decides_for_a_user_without_a_saved_language(client, login_as):
    login_as(UserFactory(locale=None))
    html = client.get("/inbox", headers=JA).get_data(as_text=True)
    assert _lang(html) == "ja" and texts(html, "h1.page-title") == ["受信箱"]


def test_the_saved_language_wins_over_accept_language(client, login_as):
    login_as(UserFactory(locale="en"))
    html = client.get("/inbox", headers=JA).get_data(as_text=True)
    assert _lang(html) == "en" and texts(html, "h1.page-title") == ["Inbox"]


def test_the_sign_in_page_follows_the_browser(client):
    html = client.get("/login", headers=JA).get_data(as_text=True)
    assert _lang(html) == "ja" and texts(html, "h1") == ["Hatoにログイン"]


def test_action_statuses_are_translated(client, csrf, japanese):
    row = NotificationFactory(user_id=japanese.id, title="会議")
    response = client.post(f"/inbox/notifications/{row.id}/read", headers={**csrf(), **HTMX})
    html = response.get_data(as_text=True)
    assert texts(html, "#inbox-status") == ["「会議」を既読にしました。"]
    assert texts(html, ".item__actions > form button") == ["アーカイブ"]  # read now: only Archive (and More) left
    assert texts(html, ".menu__toggle") == ["その他"]


def test_preferences_in_japanese(app, client, japanese, monkeypatch):
    from app.cli.vapid import generate_keys

    monkeypatch.setitem(app.config, "VAPID_PRIVATE_KEY", generate_keys()[1])  # push configured: its column shows
    NotificationTypeFactory(type="comment", label="Comments", default_email=True)
    html = client.get("/preferences").get_data(as_text=True)
    assert _lang(html) == "ja"
    assert texts(html, "h1.page-title") == ["通知設定"]
    assert texts(html, ".pref-table thead th") == ["通知", "アプリ内", "メール", "プッシュ通知"]
    assert "既定" in texts(html, ".pref-cell__source")
    assert texts(html, "#language-title") == ["言語"]
    assert texts(html, "#locale option") == ["ブラウザの設定に従う", "English", "日本語"]
    assert attrs(html, "#locale option[selected]", "value") == ["ja"]
    assert texts(html, "#frequency-comment option[selected]") == ["すぐに送信（既定）"]
    push = one(html, "#push")
    assert push["data-text-on"] == "このブラウザのプッシュ通知はオンです。"
    assert push["data-text-save-failed"] == "プッシュ通知をオンにできませんでした：{reason}"


def test_a_refused_schedule_explains_itself_in_japanese(client, csrf, japanese):
    response = client.post(
        "/preferences/schedule",
        headers={**csrf(), **HTMX},
        data={"timezone": "Nowhere/Else", "quiet": "off"},
    )
    assert response.status_code == 422
    html = response.get_data(as_text=True)
    assert "一覧からタイムゾーンを選んでください。" in texts(html, "#timezone-error")


def test_error_pages_speak_the_readers_language(client, japanese):
    response = client.get("/definitely/not/here")
    html = response.get_data(as_text=True)
    assert response.status_code == 404 and _lang(html) == "ja"
    assert "ここには何もありません。" in texts(html, "h1")[0]
    assert texts(html, "main a") == ["受信箱に戻る"]


def test_an_abort_detail_is_translated(client, japanese):
    html = client.get("/inbox?filter=nope").get_data(as_text=True)
    assert "不明な絞り込みです。" in html


def test_problem_documents_follow_accept_language(client):
    body = client.get("/v1/definitely-not-here", headers=JA).get_json()
    assert body["title"] == "ここには何もありません。"


def test_werkzeugs_stock_english_gives_way_to_ours(client, japanese):
    response = client.post("/inbox")  # GET only: werkzeug's own 405 description is English
    html = response.get_data(as_text=True)
    assert response.status_code == 405 and "ここではその操作はできません。" in html


def test_a_flash_is_in_japanese(client, csrf, japanese):
    response = client.post("/logout/everywhere", headers=csrf(), follow_redirects=True)
    html = response.get_data(as_text=True)
    signed_out = "ほかのすべてのセッションからログアウトしました。このブラウザはログインしたままです。"
    assert signed_out in texts(html, ".alert")


# --- the language setting -------------------------------------------------------------------------


def _saved_locale(user_id: int) -> str | None:
    return db.session.execute(sa.text("SELECT locale FROM users WHERE id = :id"), {"id": user_id}).scalar_one()


def test_switching_the_language_changes_the_next_page(client, csrf, login_as):
    user = login_as(UserFactory(locale=None))
    assert texts(client.get("/preferences").get_data(as_text=True), "h1.page-title") == ["Preferences"]

    response = client.post("/preferences/language", headers=csrf(), data={"locale": "ja"})
    assert response.status_code == 303 and response.headers["Location"].endswith("/preferences?saved=language#language")
    assert _saved_locale(user.id) == "ja"
    html = client.get("/preferences?saved=language").get_data(as_text=True)
    assert _lang(html) == "ja" and texts(html, "h1.page-title") == ["通知設定"]
    assert texts(html, "#language .alert--success") == ["保存しました。これからは日本語で表示します。"]
    assert texts(client.get("/inbox").get_data(as_text=True), "h1.page-title") == ["受信箱"]

    client.post("/preferences/language", headers=csrf(), data={"locale": "en"})
    assert _saved_locale(user.id) == "en"
    assert texts(client.get("/inbox", headers=JA).get_data(as_text=True), "h1.page-title") == ["Inbox"]

    client.post("/preferences/language", headers=csrf(), data={"locale": ""})  # back to the browser's
    assert _saved_locale(user.id) is None
    assert texts(client.get("/inbox", headers=JA).get_data(as_text=True), "h1.page-title") == ["受信箱"]
    html = client.get("/preferences").get_data(as_text=True)
    assert attrs(html, "#locale option[selected]", "value") == [""]


def test_htmx_saves_and_reloads_the_whole_page(client, csrf, login_as):
    user = login_as(UserFactory(locale="en"))
    response = client.post("/preferences/language", headers={**csrf(), **HTMX}, data={"locale": "ja"})
    assert response.status_code == 200
    assert response.headers["HX-Redirect"].endswith("/preferences?saved=language#language")
    assert _saved_locale(user.id) == "ja"


def test_an_unknown_language_is_refused_and_nothing_changes(client, csrf, login_as):
    user = login_as(UserFactory(locale="en"))
    response = client.post("/preferences/language", headers={**csrf(), **HTMX}, data={"locale": "xx"})
    assert response.status_code == 422
    assert texts(response.get_data(as_text=True), "#language .alert--error") == [
        "Nothing was saved. Choose a language from the list."
    ]
    page = client.post("/preferences/language", headers=csrf(), data={"locale": "fr"})
    assert page.status_code == 422 and one(page.get_data(as_text=True), "#locale")["aria-invalid"] == "true"
    assert db.session.get(User, user.id).locale == "en"


def test_the_language_form_needs_a_csrf_token(client, login_as):
    user = login_as(UserFactory(locale="en"))
    assert client.post("/preferences/language", data={"locale": "ja"}).status_code == 400
    assert _saved_locale(user.id) == "en"


def test_the_browser_default_says_what_the_browser_asks_for(client, login_as):
    login_as(UserFactory(locale=None))
    html = client.get("/preferences", headers=JA).get_data(as_text=True)
    assert "現在は日本語です。" in texts(html, "#locale-help")[0]
    assert parse(html).select_one("#locale option[value=''][selected]") is not None


def test_a_switch_says_what_it_did_in_japanese(client, csrf, japanese):
    NotificationTypeFactory(type="comment", label="Comments", default_push=False)
    data = {"type": "comment", "channel": "push", "enabled": "on"}
    html = client.post("/preferences", headers={**csrf(), **HTMX}, data=data).get_data(as_text=True)
    assert texts(html, "#prefs-status") == ["Commentsのプッシュ通知をオンにしました。"]
    assert attrs(html, "button[role=switch]", "aria-label") == ["プッシュ通知：Comments"]
    assert texts(html, ".pref-cell__source") == ["あなたの設定"]


def test_the_snooze_page_and_its_refusal_in_japanese(client, csrf, japanese):
    row = NotificationFactory(user_id=japanese.id, title="会議")
    html = client.get(f"/inbox/notifications/{row.id}/snooze").get_data(as_text=True)
    assert texts(html, "h1.page-title") == ["「会議」をスヌーズ"]
    assert "1時間スヌーズ" in texts(html, "button")
    response = client.post(f"/inbox/notifications/{row.id}/snooze", headers=csrf(), data={"until": "2000-01-01T09:00"})
    assert response.status_code == 422
    assert texts(response.get_data(as_text=True), "#snooze-error") == [
        "その時刻はすでに過ぎています。これから先の時刻を選んでください。"
    ]
