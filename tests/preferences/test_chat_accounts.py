"""Issue 29 item 7: the preferences page shows the member's linked chat accounts, each with Unlink."""

from __future__ import annotations

from app.extensions import db
from app.users import chat_accounts
from tests.factories import UserFactory
from tests.support.html import one, parse

SECRET_PATH = "/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX"


def _items(html: str) -> list[str]:
    return [" ".join(li.get_text(" ").split()) for li in parse(html).select("#chat-accounts li")]


def _link_all(user) -> None:
    chat_accounts.put_account(user.id, "slack", {"channel": "U024BE7LH"})
    chat_accounts.put_account(user.id, "discord", {"webhook_url": "https://discord.com/api/webhooks/1/secret-token"})
    chat_accounts.put_account(user.id, "line", {"user_id": "U4af4980629"})
    chat_accounts.put_account(user.id, "msteams", {"webhook_url": f"https://acme.webhook.office.com{SECRET_PATH}"})
    db.session.flush()


def test_the_page_lists_each_service_where_it_lands_and_never_a_webhooks_secret_path(client, member):
    _link_all(member)
    html = client.get("/preferences").get_data(as_text=True)
    items = _items(html)
    assert [item.split(" ·")[0] for item in items] == [
        "Discord a webhook on discord.com",
        "LINE messages from the official account",
        "Microsoft Teams a webhook on acme.webhook.office.com",
        "Slack direct messages from the app",
    ]
    assert all(item.endswith("Linked Unlink") for item in items)
    assert SECRET_PATH not in html and "secret-token" not in html


def test_an_account_a_service_refused_says_so(client, member):
    chat_accounts.put_account(member.id, "slack", {"channel": "C0123"})
    db.session.flush()
    chat_accounts.invalidate(db.session.connection(), member.id, "slack", {"channel": "C0123"}, "channel_not_found")
    (item,) = _items(client.get("/preferences").get_data(as_text=True))
    assert "the channel C0123" in item and "No longer accepted by Slack" in item


def test_unlink_removes_only_that_account(client, member, csrf):
    _link_all(member)
    response = client.post("/preferences/chat/slack/unlink", headers=csrf())
    assert response.status_code == 303 and response.headers["Location"].endswith("saved=chat-unlinked#chat-accounts")
    assert [a.provider for a in chat_accounts.accounts_of(member.id)] == ["discord", "line", "msteams"]
    html = client.get(response.headers["Location"]).get_data(as_text=True)
    assert one(html, "#chat-accounts [role=status]").get_text(strip=True) == "It is unlinked."


def test_unlink_touches_no_one_elses_account(client, member, csrf):
    other = UserFactory()
    chat_accounts.put_account(other.id, "slack", {"channel": "U999"})
    db.session.flush()
    assert client.post("/preferences/chat/slack/unlink", headers=csrf()).status_code == 404
    assert [a.provider for a in chat_accounts.accounts_of(other.id)] == ["slack"]


def test_unlink_needs_the_csrf_token(client, member):
    chat_accounts.put_account(member.id, "line", {"user_id": "U1"})
    db.session.flush()
    assert client.post("/preferences/chat/line/unlink").status_code in (400, 403)
    assert [a.provider for a in chat_accounts.accounts_of(member.id)] == ["line"]


def test_the_section_is_left_out_without_chat_or_an_account(client, member):
    assert parse(client.get("/preferences").get_data(as_text=True)).select("#chat-accounts") == []


def test_the_page_in_japanese(client, member):
    member.locale = "ja"
    _link_all(member)
    html = client.get("/preferences").get_data(as_text=True)
    assert one(html, "#chat-accounts-title").get_text(strip=True) == "チャットアカウント"
