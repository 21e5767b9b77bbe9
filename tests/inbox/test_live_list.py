"""GET /inbox/live: the newest page's content alone, for the live list (own rows only, signed in)."""

from __future__ import annotations

from app.notify.service import notify
from tests.factories import NotificationTypeFactory, UserFactory


def send(user, title: str, key: str) -> None:
    notify([user.id], by="user_id", type_="comment", title=title, body="", dedupe_key=key)


def test_live_content_lists_only_the_users_own_newest_rows(client, login_as):
    NotificationTypeFactory(type="comment")
    me, other = UserFactory(), UserFactory()
    send(me, "Mine", "m1")
    send(other, "Someone else's", "o1")
    login_as(me)
    response = client.get("/inbox/live?filter=unread")
    page = response.get_data(as_text=True)
    assert response.status_code == 200 and page.lstrip().startswith('<div id="inbox-content"')
    assert "Mine" in page and "Someone else" not in page and "<html" not in page
    assert 'data-live-url="/inbox/live?filter=unread"' in page


def test_the_inbox_page_marks_only_its_newest_page_live(client, login_as):
    login_as(UserFactory())
    assert 'data-live-url="/inbox/live?filter=all"' in client.get("/inbox").get_data(as_text=True)
    assert "data-live-url" not in client.get("/inbox?filter=archived").get_data(as_text=True)


def test_live_content_needs_a_signed_in_user(client):
    response = client.get("/inbox/live")
    assert response.status_code == 302 and "/login" in response.headers["Location"]


def test_live_content_refuses_other_views(client, login_as):
    login_as(UserFactory())
    assert client.get("/inbox/live?filter=archived").status_code == 400
    assert client.get("/inbox/live?filter=nonsense").status_code == 400
