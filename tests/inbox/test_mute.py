"""Mute a thread from the inbox: only rows with a group key of a type that is not mandatory."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from tests.factories import NotificationFactory, NotificationTypeFactory
from tests.inbox.conftest import state
from tests.support.html import one, parse


def _mutes() -> list[tuple]:
    return [tuple(r) for r in db.session.execute(sa.text("SELECT user_id, group_key FROM notification_mutes"))]


def _mute_buttons(html: str) -> list[str]:
    return [b["aria-label"] for b in parse(html).select("form[action$='/mute'] button")]


def test_the_menu_offers_mute_only_for_a_thread_of_a_type_that_is_not_mandatory(client, member):
    NotificationTypeFactory(type="security", mandatory=True)
    NotificationFactory(user_id=member.id, title="Reply", group_key="post:123")
    NotificationFactory(user_id=member.id, title="Alone")
    NotificationFactory(user_id=member.id, title="Sign-in", type="security", group_key="login:1")
    assert _mute_buttons(client.get("/inbox").get_data(as_text=True)) == ["Mute this thread: Reply"]


def test_mute_records_the_thread_keeps_its_rows_and_redraws_the_row(client, member, htmx, published):
    first = NotificationFactory(user_id=member.id, title="Reply 1", group_key="post:123")
    second = NotificationFactory(user_id=member.id, title="Reply 2", group_key="post:123")
    response = client.post(f"/inbox/notifications/{first.id}/mute", headers=htmx())
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    row = one(html, f"li#notification-{first.id}")
    assert "Thread muted" in row.get_text() and _mute_buttons(str(row)) == []
    assert one(html, "#inbox-status").get_text() == "Muted the thread of “Reply 1”. Unmute it in Preferences."
    assert _mutes() == [(member.id, "post:123")]
    assert state(first.id) == (None, None) and state(second.id) == (None, None)  # existing rows stay unread
    page = client.get("/inbox").get_data(as_text=True)
    assert _mute_buttons(page) == [] and len(parse(page).select("li.item--unread")) == 2
    assert client.post(f"/inbox/notifications/{second.id}/mute", headers=htmx()).status_code == 200  # twice: no-op
    assert _mutes() == [(member.id, "post:123")]


def test_mute_without_javascript_redirects_back(client, member, csrf):
    row = NotificationFactory(user_id=member.id, group_key="issue:7")
    response = client.post(f"/inbox/notifications/{row.id}/mute", data={"next": "/inbox?filter=unread"}, headers=csrf())
    assert response.status_code == 303 and response.headers["Location"] == "/inbox?filter=unread"
    assert _mutes() == [(member.id, "issue:7")]


def test_a_mandatory_type_or_a_row_without_a_thread_cannot_be_muted(client, member, htmx):
    NotificationTypeFactory(type="security", mandatory=True)
    mandatory = NotificationFactory(user_id=member.id, type="security", group_key="login:1")
    loose = NotificationFactory(user_id=member.id)
    for row in (mandatory, loose):
        assert client.post(f"/inbox/notifications/{row.id}/mute", headers=htmx()).status_code == 422
    assert _mutes() == []
