"""E-mail in the recipient's language (issue 17): Hato's own words around the message, and the unsubscribe page."""

from __future__ import annotations

from email.utils import parseaddr

import pytest
import sqlalchemy as sa

from app.delivery.rendering import render_email
from app.delivery.unsubscribe import make_token
from jobs.delivery import deliver_batch
from tests.delivery.test_rendering import row
from tests.factories import UserFactory
from tests.support.html import one, texts

UNSUBSCRIBE = "https://hato.example/unsubscribe/t"


def _render(app, **fields):
    with app.app_context():  # as a worker renders: no request, no reader
        return render_email(row(**fields), None, "https://hato.example", UNSUBSCRIBE)


def test_a_japanese_recipient_gets_japanese_chrome(app):
    rendered = _render(app, locale="ja-JP")
    assert one(rendered.html, "html")["lang"] == "ja"
    assert texts(rendered.html, "a.button") == ["Hatoで開く"]
    footer = texts(rendered.html, ".footer")[0]
    assert "Commentsのメールを受け取る設定になっているため" in footer
    assert texts(rendered.html, ".footer a") == ["Commentsのメールを配信停止する"]
    assert rendered.text.endswith(f"\n--\nCommentsのメールの配信停止：{UNSUBSCRIBE}\n")
    assert rendered.subject == "New comment"  # the notification's own words stay as they were written


@pytest.mark.parametrize("locale", [None, "en", "pt-BR"])
def test_others_get_the_default_language(app, locale):
    rendered = _render(app, locale=locale)
    assert one(rendered.html, "html")["lang"] == "en"
    assert texts(rendered.html, ".footer a") == ["Unsubscribe from Comments e-mails"]
    assert rendered.text.endswith(f"Unsubscribe from Comments e-mails: {UNSUBSCRIBE}\n")


def test_the_recipients_language_wins_over_the_request_that_renders(app):
    with app.test_request_context(headers={"Accept-Language": "ja"}):  # an operator's preview, say
        rendered = render_email(row(locale="en"), None, "https://hato.example", UNSUBSCRIBE)
    assert texts(rendered.html, "a.button") == ["Open in Hato"]


@pytest.mark.committed
def test_the_worker_sends_japanese_mail(app, smtp_sink, make_delivery):
    user = UserFactory(email="hanako@example.com", locale="ja", timezone="Asia/Tokyo")
    delivery = make_delivery(user=user, title="請求書が届きました", body="本文")
    assert deliver_batch("email", [delivery.id])["sent"] == 1
    [received] = smtp_sink.messages
    msg = received.message
    assert msg["Subject"] == "請求書が届きました"
    text = msg.get_body(("plain",)).get_content()
    html = msg.get_body(("html",)).get_content()
    assert "Commentsのメールの配信停止：" in text
    assert one(html, "html")["lang"] == "ja" and "配信停止する" in html


def test_the_unsubscribe_page_speaks_the_recipients_saved_language(client, email_type):
    user = UserFactory(locale="ja")
    html = client.get(f"/unsubscribe/{make_token(user.id, email_type.type)}").get_data(as_text=True)
    assert one(html, "html")["lang"] == "ja"
    assert texts(html, "h1") == ["Commentsのメールを配信停止しますか？"]
    assert texts(html, "form button") == ["配信停止"]


def test_without_a_saved_language_the_unsubscribe_page_follows_the_browser(client, email_type):
    user = UserFactory(locale=None)
    token = make_token(user.id, email_type.type)
    assert texts(client.get(f"/unsubscribe/{token}").get_data(as_text=True), "h1") == [
        "Unsubscribe from Comments e-mails?"
    ]
    html = client.get(f"/unsubscribe/{token}", headers={"Accept-Language": "ja"}).get_data(as_text=True)
    assert texts(html, "h1") == ["Commentsのメールを配信停止しますか？"]


@pytest.mark.committed
def test_a_japanese_recipient_reads_the_types_japanese_label_in_the_mail_and_on_the_unsubscribe_page(
    app, client, smtp_sink, make_delivery
):
    from app.extensions import db

    user = UserFactory(email="hanako@example.com", locale="ja-JP", timezone="Asia/Tokyo")
    english = UserFactory(email="ann@example.com", locale="en")
    delivery = make_delivery(user=user, title="請求書が届きました", body="本文")
    other = make_delivery(user=english, title="Invoice", body="Body")
    db.session.execute(sa.text("""UPDATE notification_types SET locales = '{"ja": {"label": "コメント"}}'"""))
    db.session.commit()

    assert deliver_batch("email", [delivery.id, other.id])["sent"] == 2

    bodies = {parseaddr(m.message["To"])[1]: m.message.get_body(("plain",)).get_content() for m in smtp_sink.messages}
    assert "コメントのメールの配信停止：" in bodies["hanako@example.com"]  # the variant, along ja-jp → ja
    assert "Unsubscribe from Comments e-mails:" in bodies["ann@example.com"]  # the base label
    html = client.get(f"/unsubscribe/{make_token(user.id, 'comment')}").get_data(as_text=True)
    assert texts(html, "h1") == ["コメントのメールを配信停止しますか？"]
