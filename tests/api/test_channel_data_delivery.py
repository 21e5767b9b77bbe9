"""End to end: the product sets a member's Slack and LINE channel data, posts a notification on `chat`, and the
engine delivers it to the Slack DM and the LINE push once each (local Slack and LINE stand-ins)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from jobs.delivery import deliver_batch
from tests.api.conftest import send_body
from tests.factories import NotificationTypeFactory
from tests.support.line_server import LineServer
from tests.support.slack_server import SlackServer

LINE_USER = "U" + "fedcba9876543210" * 2


@pytest.fixture
def chat(app, monkeypatch):
    with SlackServer() as slack, LineServer() as line:
        for name, value in {**slack.settings(), **line.settings(), "CHAT_PROVIDER": "slack,line"}.items():
            monkeypatch.setitem(app.config, name, value)
        yield slack, line


@pytest.mark.committed  # the engine records on its own autocommit connection
def test_a_chat_notification_reaches_the_slack_dm_and_line_once(app, api, chat, recipient):
    slack, line = chat
    NotificationTypeFactory(type="comment", default_channels=["chat"])
    external = recipient.external_id
    assert api.put(f"/v1/users/{external}/channel-data/slack", {"channel": "U0MEMBER9"}).status_code == 201
    assert api.put(f"/v1/users/{external}/channel-data/line", {"user_id": LINE_USER}).status_code == 201

    response = api.post("/v1/notifications", send_body(external, channels=["chat"], title="Build #7 failed"))
    assert response.status_code == 202, response.get_json()
    notification = response.get_json()["results"][0]["notification_id"]
    db.session.expire_all()
    (delivery,) = db.session.execute(sa.text("SELECT id FROM notification_deliveries WHERE notification_id = :n "
                                             "AND channel = 'chat'"), {"n": notification}).scalars()  # fmt: skip
    db.session.commit()

    assert deliver_batch("chat", [delivery])["sent"] == 1
    deliver_batch("chat", [delivery])  # a duplicate job: nothing more
    assert [(p.channel, p.text.splitlines()[0]) for p in slack.received] == [("U0MEMBER9", "Build #7 failed")]
    assert [(p.to, p.messages[0]["text"].splitlines()[0]) for p in line.received] == [(LINE_USER, "Build #7 failed")]
    shown = api.get(f"/v1/notifications/{notification}").get_json()["deliveries"]
    assert [(d["channel"], d["status"]) for d in shown if d["channel"] == "chat"] == [("chat", "sent")]


@pytest.mark.committed
def test_a_member_without_chat_accounts_gets_the_row_skipped_and_nothing_sent(app, api, chat, recipient):
    NotificationTypeFactory(type="comment", default_channels=["chat"])
    response = api.post("/v1/notifications", send_body(recipient.external_id, channels=["chat"]))
    notification = response.get_json()["results"][0]["notification_id"]
    db.session.expire_all()
    query = sa.text("SELECT id, status, skip_reason FROM notification_deliveries WHERE notification_id = :n")
    delivery = db.session.execute(query, {"n": notification}).one().id
    db.session.commit()
    assert deliver_batch("chat", [delivery]).get("skipped") == 1
    db.session.expire_all()
    assert tuple(db.session.execute(query, {"n": notification}).one())[1:] == ("skipped", "no_chat_account")
    assert chat[0].received == [] and chat[1].received == []
