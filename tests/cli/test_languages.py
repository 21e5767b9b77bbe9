"""The CLI speaks DEFAULT_LOCALE's language (there is no request); the demo seed has a Japanese member."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from flask_babel import refresh

from app.cli.demo_data import DEMO_ACCOUNTS
from app.delivery.rendering import render_string
from app.extensions import db
from app.models import MessageTemplate, Notification, User


@pytest.fixture
def japanese_default(app, monkeypatch):
    """DEFAULT_LOCALE=ja, as an installation in Japan sets it."""
    monkeypatch.setitem(app.config, "DEFAULT_LOCALE", "ja")
    refresh()  # Flask-Babel caches the language on the app context
    yield
    refresh()


def test_cli_messages_follow_default_locale(app, japanese_default):
    runner = app.test_cli_runner()
    listing = runner.invoke(args=["api-keys", "list"])
    assert listing.exit_code == 0
    assert listing.output.strip() == "APIキーはまだありません。作成するには: flask --app wsgi api-keys create NAME"
    unknown = runner.invoke(args=["worker", "--burst", "nope"])
    assert unknown.exit_code != 0 and "不明なキュー nope です。" in unknown.output
    revoked = runner.invoke(args=["api-keys", "revoke", "hato_nothing"])
    assert revoked.exit_code != 0 and "接頭辞が 'hato_nothing' の有効なキーはありません" in revoked.output


def test_cli_messages_are_english_by_default(app):
    result = app.test_cli_runner().invoke(args=["api-keys", "list"])
    assert result.output.strip() == "No API keys yet: flask --app wsgi api-keys create NAME"


def test_demo_seed_prints_logins_in_japanese(app, japanese_default):
    result = app.test_cli_runner().invoke(args=["demo", "seed"])
    assert result.exit_code == 0, result.output
    assert "デモデータを読み込みました。" in result.output
    assert "hanako@example.com" in result.output and "パスワード: hato-hanako-demo  （ja、Asia/Tokyo）" in result.output


def test_demo_seed_has_a_japanese_member_with_japanese_notifications_and_templates(app):
    result = app.test_cli_runner().invoke(args=["demo", "seed"])
    assert result.exit_code == 0, result.output
    hanako_line = next(line for line in result.output.splitlines() if "hanako@example.com" in line)
    assert "password: hato-hanako-demo" in hanako_line and "(ja, Asia/Tokyo)" in hanako_line

    hanako = db.session.scalars(sa.select(User).where(User.email == "hanako@example.com")).one()
    assert (hanako.display_name, hanako.locale, hanako.timezone, hanako.role) == (
        "山田花子",
        "ja",
        "Asia/Tokyo",
        "member",
    )
    assert hanako.check_password("hato-hanako-demo")
    languages = {a["email"]: a["locale"] for a in DEMO_ACCOUNTS}
    assert (languages["alice@example.com"], languages["bob@example.com"]) == ("en", "de")
    alice = db.session.scalars(sa.select(User).where(User.email == "alice@example.com")).one()
    assert alice.locale == "en"

    titles = set(db.session.scalars(sa.select(Notification.title).where(Notification.user_id == hanako.id)))
    assert {"予約 #310 が承認されました", "予約 #301 にコメントが付きました"} <= titles
    assert all("Reservation" not in t and "sign-in" not in t for t in titles)
    alice_titles = set(db.session.scalars(sa.select(Notification.title).where(Notification.user_id == alice.id)))
    assert "Reservation #310 was approved" in alice_titles

    templates = db.session.scalars(
        sa.select(MessageTemplate).where(MessageTemplate.locale == "ja", MessageTemplate.channel == "email")
    ).all()
    assert {t.type for t in templates} == {"reservation_approved", "reservation_remind", "comment", "security"}
    approved = next(t for t in templates if t.type == "reservation_approved")
    context = {
        "user": {"name": "山田花子", "email": "hanako@example.com", "locale": "ja"},
        "notification": {"title": "予約 #310 が承認されました", "body": "本文", "link": "https://hato.test/r/310"},
    }
    assert render_string(approved.subject, context) == "【予約の承認】予約 #310 が承認されました"
    text = render_string(approved.body_text, context)
    assert (
        text.startswith("山田花子 様\n\nご予約が承認されました。") and "詳細はこちら：https://hato.test/r/310" in text
    )

    # a second run keeps the same rows (and an operator's edit of a template)
    approved.subject = "edited"
    db.session.flush()
    assert app.test_cli_runner().invoke(args=["demo", "seed"]).exit_code == 0
    db.session.expire_all()
    assert db.session.get(MessageTemplate, approved.id).subject == "edited"
    assert (
        db.session.scalar(sa.select(sa.func.count()).select_from(User).where(User.email == "hanako@example.com")) == 1
    )
