"""Members unfollow: from an inbox row that came from a topic, and from Preferences; only their own subscription;
CSRF; the product hears `topic.unsubscribed`."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.webhooks.service import forget_subscriptions
from tests.factories import NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.html import one, parse


@pytest.fixture
def member(login_as):
    NotificationTypeFactory(type="comment")
    return login_as(UserFactory(external_id="member-1", timezone="Asia/Tokyo"))


@pytest.fixture
def htmx(csrf):
    return lambda: {**csrf(), "HX-Request": "true"}


@pytest.fixture
def hook():
    """An enabled webhook endpoint that wants topic.unsubscribed (inserted as is: registration resolves its host)."""
    db.session.execute(
        sa.text(
            "INSERT INTO webhook_endpoints (url, event_types, secret_sealed, secret_hint)"
            " VALUES ('https://example.com/hooks', '{topic.unsubscribed}', 'x', 'abcd')"
        )
    )
    forget_subscriptions()
    yield
    forget_subscriptions()


def _topic(key: str, name: str, *user_ids: int) -> int:
    topic_id = db.session.execute(
        sa.text("INSERT INTO topics (key, name) VALUES (:k, :n) RETURNING id"), {"k": key, "n": name}
    ).scalar_one()
    for user_id in user_ids:
        db.session.execute(sa.text("INSERT INTO topic_subscriptions (user_id, topic_id) VALUES (:u, :t)"),
                           {"u": user_id, "t": topic_id})  # fmt: skip
    return topic_id


def _from_topic(user_id: int, topic_id: int, title: str = "Ann commented"):
    row = NotificationFactory(user_id=user_id, title=title)
    db.session.execute(sa.text("UPDATE notifications SET topic_id = :t WHERE id = :id"), {"t": topic_id, "id": row.id})
    return row


def _follows(user_id: int) -> list[str]:
    return list(db.session.execute(
        sa.text("SELECT t.key FROM topic_subscriptions s JOIN topics t ON t.id = s.topic_id WHERE s.user_id = :u "
                "ORDER BY t.key"), {"u": user_id}).scalars())  # fmt: skip


def _events() -> list[dict]:
    rows = db.session.execute(sa.text("SELECT payload FROM webhook_deliveries WHERE event_type = 'topic.unsubscribed'"))
    return [json.loads(payload)["data"] for (payload,) in rows]


def _unfollow_buttons(html: str) -> list[str]:
    return [b.get_text() for b in parse(html).select("form[action$='/unfollow'] button")]


def test_a_row_from_a_followed_topic_offers_unfollow(client, member):
    apollo = _topic("project:42", "Project Apollo", member.id)
    gone = _topic("project:7", "Project Seven")  # not followed (any more)
    _from_topic(member.id, apollo, "On Apollo")
    _from_topic(member.id, gone, "On Seven")
    NotificationFactory(user_id=member.id, title="Plain")

    assert _unfollow_buttons(client.get("/inbox").get_data(as_text=True)) == ["Unfollow Project Apollo"]


def test_unfollow_from_the_inbox_row(client, member, htmx, hook):
    apollo = _topic("project:42", "Project Apollo", member.id)
    row = _from_topic(member.id, apollo)

    response = client.post(f"/inbox/notifications/{row.id}/unfollow", headers=htmx())

    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert _unfollow_buttons(str(one(html, f"li#notification-{row.id}"))) == []
    assert one(html, "#inbox-status").get_text() == "You no longer follow Project Apollo."
    assert _follows(member.id) == []
    assert _events() == [{"user_id": member.id, "user": "member-1", "topic": "project:42"}]
    # Again: the row no longer offers it, and the POST is refused without writing or telling anything.
    assert client.post(f"/inbox/notifications/{row.id}/unfollow", headers=htmx()).status_code == 422
    assert len(_events()) == 1


def test_another_members_row_or_subscription_is_never_touched(client, member, htmx):
    other = UserFactory(external_id="other-1")
    apollo = _topic("project:42", "Project Apollo", member.id, other.id)
    theirs = _from_topic(other.id, apollo)

    assert client.post(f"/inbox/notifications/{theirs.id}/unfollow", headers=htmx()).status_code == 404
    assert client.post("/preferences/topics/unfollow", data={"topic": "nope"}, headers=htmx()).status_code == 404
    assert _follows(other.id) == ["project:42"] and _follows(member.id) == ["project:42"]
    # The preferences form names a topic, never a user: unfollowing there removes the member's own row only.
    assert client.post("/preferences/topics/unfollow", data={"topic": "project:42"}, headers=htmx()).status_code == 200
    assert _follows(other.id) == ["project:42"] and _follows(member.id) == []


def test_unfollow_needs_a_csrf_token(client, member):
    apollo = _topic("project:42", "Project Apollo", member.id)
    row = _from_topic(member.id, apollo)

    assert client.post(f"/inbox/notifications/{row.id}/unfollow").status_code == 400
    assert client.post("/preferences/topics/unfollow", data={"topic": "project:42"}).status_code == 400
    assert _follows(member.id) == ["project:42"]


def test_preferences_lists_the_topics_with_unfollow(client, member, htmx, hook):
    _topic("project:42", "Project Apollo", member.id)
    _topic("project:7", "Project Seven", member.id)
    _topic("project:9", "Not mine")

    page = client.get("/preferences").get_data(as_text=True)
    items = [li.select_one(".pref-type").get_text() for li in parse(page).select("#topic-list li")]
    assert items == ["Project Apollo", "Project Seven"]

    first = client.post("/preferences/topics/unfollow", data={"topic": "project:42"}, headers=htmx())
    assert first.status_code == 200 and "You no longer follow Project Apollo." in first.get_data(as_text=True)
    assert "topics-empty" not in first.get_data(as_text=True)
    last = client.post("/preferences/topics/unfollow", data={"topic": "project:7"}, headers=htmx())
    assert 'id="topics-empty"' in last.get_data(as_text=True)
    assert _follows(member.id) == [] and [e["topic"] for e in _events()] == ["project:42", "project:7"]


def test_unfollow_without_javascript_redirects(client, member, csrf):
    _topic("project:42", "Project Apollo", member.id)
    response = client.post("/preferences/topics/unfollow", data={"topic": "project:42"}, headers=csrf())
    assert response.status_code == 303 and response.headers["Location"].endswith("/preferences#topics")
