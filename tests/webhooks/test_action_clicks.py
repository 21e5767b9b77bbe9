"""Action buttons (issue 33): a named action's click reaches the product once, from the inbox, an e-mail or a push."""

from __future__ import annotations

import json
import re

import pytest
import sqlalchemy as sa
from flask import g
from itsdangerous import URLSafeTimedSerializer

from app.actions import signing
from app.extensions import db
from app.unitofwork import commit
from tests.factories import NotificationFactory, NotificationTypeFactory, UserFactory
from tests.webhooks.helpers import drain, register

APPROVE = {"label": "Approve", "labels": {"ja": "承認"}, "action": "approve"}
VIEW = {"label": "View order", "url": "/orders/42"}


def _row(user, **fields):
    NotificationTypeFactory(type="comment")
    return NotificationFactory(user_id=user.id, type="comment", title="Leave request", actions=[APPROVE, VIEW],
                               data={"request": 7}, **fields)  # fmt: skip


def _clicks(fresh: bool = False) -> list:
    if fresh:  # a committed test: see the app's commits
        db.session.rollback()
    return db.session.execute(
        sa.text("SELECT user_id, notification_id, name, via FROM notification_action_clicks")
    ).all()


def _read(notification_id: int) -> bool:
    sql = sa.text("SELECT read_at IS NOT NULL FROM notifications WHERE id = :id")
    return db.session.execute(sql, {"id": notification_id}).scalar()


def _form_token(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


@pytest.mark.committed
def test_inbox_and_email_clicks_reach_the_receiver_once(app, client, login_as, local_webhooks, receiver):
    register(receiver, ["notification.action"])
    member = login_as(UserFactory(locale="ja"))
    row = _row(member)
    commit()
    html = client.get("/inbox").get_data(as_text=True)
    assert 'data-action="approve"' in html and ">承認<" in html and 'href="/orders/42"' in html
    token = _form_token(html)
    for _ in range(2):  # a double click
        response = client.post(f"/inbox/notifications/{row.id}/actions/approve", data={"csrf_token": token},
                               headers={"HX-Request": "true"})  # fmt: skip
        assert response.status_code == 200
    assert 'data-action-state="approve"' in response.get_data(as_text=True)  # "Sent", asking for the answer
    # the same action from the e-mail's signed link sends nothing more
    with app.test_request_context():
        link = signing.action_url("", member.id, row.id, "approve")
    page = client.get(link).get_data(as_text=True)
    again = client.post(link, data={"csrf_token": _form_token(page)}).get_data(as_text=True)
    assert "すでに送信済みです" in again  # the member reads Japanese: "This was already sent."
    drain()
    assert sum(receiver.wire.values()) == 1 and len(receiver.store) == 1
    (event,) = receiver.store.values()
    assert event["type"] == "notification.action"
    data = event["data"]
    assert (data["user"], data["user_id"], data["locale"], data["via"]) == (
        member.external_id,
        member.id,
        "ja",
        "inbox",
    )
    assert data["notification"] == {
        "id": row.id,
        "type": "comment",
        "dedupe_key": row.dedupe_key,
        "data": {"request": 7},
    }
    assert data["action"] == {"name": "approve", "label": "Approve"}
    assert _clicks(fresh=True) == [(member.id, row.id, "approve", "inbox")]
    assert _read(row.id)


def test_an_email_link_acts_only_on_post(app, client):
    member = UserFactory()
    row = _row(member)
    with app.test_request_context():
        link = signing.action_url("", member.id, row.id, "approve")
    page = client.get(link)
    assert page.status_code == 200 and "Approve" in page.get_data(as_text=True)
    assert _clicks() == [] and not _read(row.id)  # a scanner's GET does nothing
    assert client.post(link).status_code == 400  # the page's CSRF token is required
    done = client.post(link, data={"csrf_token": _form_token(page.get_data(as_text=True))})
    assert done.status_code == 200 and "data-action-state" in done.get_data(as_text=True)
    assert _clicks() == [(member.id, row.id, "approve", "email")] and _read(row.id)


def test_tampered_expired_and_foreign_links_are_refused(app, client, monkeypatch):
    member = UserFactory()
    row = _row(member)
    with app.test_request_context():
        token = signing.make_token(member.id, row.id, "approve")
        forged = URLSafeTimedSerializer("not the key", salt=signing.SALT).dumps([member.id, row.id, "approve"])
        other = signing.make_token(UserFactory().id, row.id, "approve")  # another member's id on this row
        unknown = signing.make_token(member.id, row.id, "view")  # a link button is no named action
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    for bad in (tampered, forged, other, unknown, "x"):
        assert client.get(f"/actions/{bad}").status_code == 404
    monkeypatch.setitem(app.config, "ACTION_LINK_MAX_AGE_SECONDS", -1)
    assert client.get(f"/actions/{token}").status_code == 410
    assert _clicks() == []


def test_other_members_rows_and_csrf(client, login_as, csrf):
    owner, intruder = UserFactory(), UserFactory()
    row = _row(owner)
    _as(login_as, intruder)
    assert client.post(f"/inbox/notifications/{row.id}/actions/approve", headers=csrf()).status_code == 404
    assert client.get(f"/inbox/notifications/{row.id}/actions").status_code == 404
    _as(login_as, owner)
    assert client.post(f"/inbox/notifications/{row.id}/actions/approve").status_code == 400  # no CSRF token
    assert client.post(f"/inbox/notifications/{row.id}/actions/nope", headers=csrf()).status_code == 404
    assert client.post(f"/inbox/notifications/{row.id}/actions/view", headers=csrf()).status_code == 404
    assert _clicks() == []


def _as(login_as, user):
    g.pop("_login_user", None)  # Flask-Login caches the user on g, which outlives a test request
    return login_as(user)


def test_a_push_action_needs_the_members_session(app, client, login_as):
    member = UserFactory()
    row = _row(member)
    with app.test_request_context():
        path = f"/actions/{signing.make_token(member.id, row.id, 'approve')}/push"
    assert client.post(path).status_code == 403  # no session
    _as(login_as, UserFactory())
    assert client.post(path).status_code == 403  # another member's session
    _as(login_as, member)
    assert client.post(path, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    response = client.post(path, headers={"Sec-Fetch-Site": "same-origin"})
    assert response.status_code == 200 and response.get_json() == {"first": True, "state": None}
    assert client.post(path).get_json()["first"] is False
    assert _clicks() == [(member.id, row.id, "approve", "push")]


def test_the_answered_state_replaces_the_button(client, login_as):
    member = login_as(UserFactory())
    row = _row(member)
    db.session.execute(sa.text(
        "INSERT INTO notification_action_clicks (user_id, notification_id, name, clicked_at, via, state) "
        "VALUES (:u, :n, 'approve', now(), 'inbox', 'Approved <b>')"), {"u": member.id, "n": row.id})  # fmt: skip
    html = client.get(f"/inbox/notifications/{row.id}/actions").get_data(as_text=True)
    assert "Approved &lt;b&gt;" in html and 'data-action="approve"' not in html and "hx-trigger" not in html
    # clicked, unanswered: "Sent", asking for the answer for WAIT_MINUTES only
    sql = "UPDATE notification_action_clicks SET state = NULL, clicked_at = now() - make_interval(mins => :m)"
    db.session.execute(sa.text(sql), {"m": 1})
    assert 'hx-trigger="every 2s"' in client.get(f"/inbox/notifications/{row.id}/actions").get_data(as_text=True)
    db.session.execute(sa.text(sql), {"m": 11})
    html = client.get(f"/inbox/notifications/{row.id}/actions").get_data(as_text=True)
    assert 'data-action-state="approve"' in html and "hx-trigger" not in html
    assert json.loads(json.dumps(row.actions)) == [APPROVE, VIEW]


def test_the_bell_shows_and_clicks_the_buttons(app, client):
    from tests.feed.test_feed_api import _feed, _key, _token

    member, other = UserFactory(external_id="bell-user", locale="ja"), UserFactory()
    row, foreign = _row(member), _row(other)
    token = _token(_key(client, "feed:issue"))
    (shown,) = _feed(client, token).get_json()["notifications"]
    assert shown["actions"] == [
        {"label": "承認", "url": None, "name": "approve", "state": None, "clicked": False},
        {"label": "View order", "url": app.config["BASE_URL"].rstrip("/") + "/orders/42", "name": None,
         "state": None, "clicked": False},
    ]  # fmt: skip
    first = _feed(client, token, "POST", f"/notifications/{row.id}/actions/approve").get_json()
    again = _feed(client, token, "POST", f"/notifications/{row.id}/actions/approve").get_json()
    assert (first["changed"], again["changed"]) == (True, False)
    assert again["notification"]["actions"][0]["clicked"] and not again["notification"]["unread"]
    assert _feed(client, token, "POST", f"/notifications/{foreign.id}/actions/approve").status_code == 404
    assert _feed(client, token, "POST", f"/notifications/{row.id}/actions/view").status_code == 404
    assert _clicks() == [(member.id, row.id, "approve", "feed")]
