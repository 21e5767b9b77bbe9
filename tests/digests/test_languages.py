"""The built-in digest wording in the recipient's language (issue 17)."""

from __future__ import annotations

from datetime import UTC, datetime

from app.digests.queries import Item
from app.digests.rendering import digest_context, render_digest
from tests.support.html import one, texts

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def _items(count: int, type_="like", label="Likes"):
    return [Item(n, type_, label, f"Item {n}", "", f"/posts/{n}", NOW) for n in range(1, count + 1)]


def _render(app, locale, kind="hourly", items=None):
    with app.app_context():  # as the digest worker renders: no request
        context = digest_context("Hanako", "h@example.com", locale, kind, items or _items(3), "https://hato.example")
        return render_digest(context, app.config)


def test_a_japanese_digest(app):
    rendered = _render(app, "ja", items=_items(12))
    assert rendered.subject == "1時間ごとのダイジェスト：新しい通知 12 件"
    assert rendered.text.startswith("Hanako さん\n\nLikes (12)\n- Item 1 https://hato.example/posts/1")
    assert "  …ほか 2 件\n" in rendered.text
    assert "受信箱を開く：https://hato.example/inbox" in rendered.text
    assert rendered.text.endswith("メールを受け取る頻度の変更：https://hato.example/preferences\n")
    assert one(rendered.html, "html")["lang"] == "ja"
    assert texts(rendered.html, "h1") == ["1時間ごとのダイジェスト"]
    assert "ダイジェストのメールを受け取る設定になっているため" in texts(rendered.html, ".footer")[0]


def test_an_english_digest_and_plurals(app):
    assert _render(app, None, "daily", _items(1)).subject == "Your daily digest: 1 new notification"
    rendered = _render(app, "en")
    assert rendered.subject == "Your hourly digest: 3 new notifications"
    assert rendered.text.startswith("Hello Hanako,")
    assert "Open your inbox: https://hato.example/inbox" in rendered.text
    assert one(rendered.html, "html")["lang"] == "en"


def test_the_recipients_language_wins_over_the_callers(app):
    with app.test_request_context(headers={"Accept-Language": "ja"}):
        context = digest_context("Ann", "a@example.com", "en", "daily", _items(2), "https://hato.example")
        assert render_digest(context, app.config).subject == "Your daily digest: 2 new notifications"
