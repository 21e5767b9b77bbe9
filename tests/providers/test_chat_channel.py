"""The chat channel through the engine to local Slack and LINE (issue 29): targets, retries without a duplicate,
invalidation, rich template parts, and when the installation has chat at all."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import sqlalchemy as sa

from app.delivery import rendering
from app.delivery.channels import channel_for, member_channels
from app.extensions import db
from app.providers import Message
from app.users import chat_accounts
from jobs.delivery import deliver_batch
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.delivery import reload
from tests.support.line_server import LineServer
from tests.support.slack_server import SlackServer

LINE_USER = "U" + "0123456789abcdef" * 2
CHAT = channel_for("chat")


@pytest.fixture
def chat(app, monkeypatch):
    """Slack and LINE stand-ins, and the app's chat settings pointing at them."""
    with SlackServer() as slack, LineServer() as line:
        settings = {**slack.settings(), **line.settings(), "CHAT_PROVIDER": "slack,line"}
        for name, value in settings.items():
            monkeypatch.setitem(app.config, name, value)
        yield slack, line


def chat_row(user, body: str = "Your order shipped"):
    kind = NotificationTypeFactory(type="order", label="Orders", default_channels=["chat"])
    note = NotificationFactory(user_id=user.id, type=kind.type, title="Order #42", body=body, link_path="/orders/42")
    delivery = DeliveryFactory(notification_id=note.id, channel="chat")
    db.session.commit()
    return delivery


def member(slack: str | None = "U0MEMBER1", line: str | None = LINE_USER):
    user = UserFactory(locale="en")
    if slack:
        chat_accounts.put_account(user.id, "slack", {"channel": slack})
    if line:
        chat_accounts.put_account(user.id, "line", {"user_id": line})
    db.session.commit()
    return user


def make_due(delivery) -> None:
    db.session.execute(sa.text("UPDATE notification_deliveries SET next_attempt_at = now() WHERE id = :id"),
                       {"id": delivery.id})  # fmt: skip
    db.session.commit()


@pytest.mark.committed
def test_one_row_reaches_the_members_slack_dm_and_line_once(app, chat):
    slack, line = chat
    delivery = chat_row(member())

    assert deliver_batch("chat", [delivery.id]).get("sent") == 1
    assert deliver_batch("chat", [delivery.id]).get("claimed", 0) == 0  # a repeated job sends nothing
    (posted,) = slack.received
    (pushed,) = line.received
    link = f"{app.config['BASE_URL']}/orders/42"
    assert posted.channel == "U0MEMBER1" and posted.text == f"Order #42\nYour order shipped\n{link}"
    assert pushed.to == LINE_USER and pushed.messages[0]["text"] == posted.text
    row = reload(delivery)
    assert row.status == "sent" and set(row.provider.split("+")) == {"slack", "line"}


@pytest.mark.committed
def test_an_account_that_failed_for_now_gets_it_on_the_retry_and_the_other_not_twice(app, chat):
    slack, line = chat
    line.script(LINE_USER, 500, times=1)
    delivery = chat_row(member())

    deliver_batch("chat", [delivery.id])
    assert len(slack.received) == 1 and line.received == []
    row = reload(delivery)
    assert row.status == "pending" and row.reached == ["slack:U0MEMBER1"]  # back for LINE alone
    assert row.last_error.startswith(f"1/2 · line:{LINE_USER} transient: ")  # which one waits, and why
    make_due(delivery)
    deliver_batch("chat", [delivery.id])
    assert len(slack.received) == 1 and len(line.received) == 1
    row = reload(delivery)
    assert row.status == "sent" and row.last_error is None


@pytest.mark.committed
def test_a_retry_after_line_took_it_but_the_answer_was_lost_shows_it_once(app, chat):
    _, line = chat
    line.script(LINE_USER, 500, after_delivery=True, times=1)
    delivery = chat_row(member(slack=None))

    deliver_batch("chat", [delivery.id])
    make_due(delivery)
    deliver_batch("chat", [delivery.id])
    assert len(line.received) == 1 and line.conflicts == 1  # the same retry key: LINE answered 409
    assert reload(delivery).status == "sent"


@pytest.mark.committed
def test_a_slack_channel_that_is_gone_invalidates_that_account_only(app, chat):
    slack, line = chat
    slack.script("U0GONE001", "channel_not_found")
    user = member(slack="U0GONE001")
    delivery = chat_row(user)

    deliver_batch("chat", [delivery.id])
    row = reload(delivery)
    assert row.status == "sent" and len(line.received) == 1
    assert row.last_error.startswith("1/2 · slack:U0GONE001 permanent: ") and "channel_not_found" in row.last_error
    db.session.rollback()
    accounts = {a.provider: a for a in chat_accounts.accounts_of(user.id)}
    assert accounts["slack"].invalidated_at is not None and "channel_not_found" in accounts["slack"].invalid_reason
    assert accounts["line"].invalidated_at is None
    # The next notification goes to LINE alone.
    second = DeliveryFactory(notification_id=NotificationFactory(user_id=user.id, type="order").id, channel="chat")
    db.session.commit()
    deliver_batch("chat", [second.id])
    assert [p.channel for p in slack.received] == [] and len(line.received) == 2


@pytest.mark.committed
def test_a_member_without_a_usable_account_is_skipped(app, chat):
    delivery = chat_row(member(slack=None, line=None))
    assert deliver_batch("chat", [delivery.id]).get("skipped") == 1
    assert reload(delivery).skip_reason == "no_chat_account"


def test_chat_is_on_only_where_the_installation_configured_a_provider(app):
    config = dict(app.config)
    assert not CHAT.configured({**config, "CHAT_PROVIDER": ""})
    assert not CHAT.configured({**config, "CHAT_PROVIDER": "line", "LINE_CHANNEL_ACCESS_TOKEN": ""})
    assert CHAT.configured({**config, "CHAT_PROVIDER": "discord"})
    assert "chat" not in [c.name for c in member_channels({**config, "CHAT_PROVIDER": ""})]
    assert "chat" in [c.name for c in member_channels({**config, "CHAT_PROVIDER": "slack"})]


@dataclass(frozen=True)
class RichTemplate:
    """A template with the chat columns the template editor adds (read with getattr, present or not)."""

    subject: str = ""
    body_text: str = ""
    body_html: str = ""
    slack_blocks: str = ""
    teams_card: str = ""
    line_flex: str = ""


def test_rich_parts_are_parsed_and_every_string_in_them_rendered(app):
    row = chat_row(UserFactory(locale="en"))
    batch_row = _batch_row(row)
    blocks = '[{"type": "section", "text": {"type": "mrkdwn", "text": "*{{ notification.title }}*"}}]'
    card = '{"type": "AdaptiveCard", "version": "1.4", "body": [{"type": "TextBlock", "text": "{{ user.name }}"}]}'
    templates = {("order", "en"): RichTemplate(body_text="{{ notification.body }}!", slack_blocks=blocks,
                                               teams_card=card)}  # fmt: skip
    message = CHAT.build_message(batch_row, templates, app.config)
    assert message.text == "Your order shipped!" and message.chat.line_flex is None
    assert message.chat.slack_blocks == [{"type": "section", "text": {"type": "mrkdwn", "text": "*Order #42*"}}]
    assert message.chat.teams_card["body"][0]["type"] == "TextBlock"
    # Before the editor's columns exist, a template without them sends the text alone.
    assert CHAT.build_message(batch_row, {("order", "en"): RichTemplate()}, app.config).chat.slack_blocks is None


@pytest.mark.parametrize("blocks", ["{not json", '{"type": "section"}', "[]"])
def test_a_rich_part_that_is_not_the_json_it_must_be_is_a_render_failure(app, blocks):
    batch_row = _batch_row(chat_row(UserFactory(locale="en")))
    with pytest.raises(rendering.RenderError, match="slack_blocks"):
        CHAT.build_message(batch_row, {("order", "en"): RichTemplate(slack_blocks=blocks)}, app.config)


def _batch_row(delivery):
    from app.delivery.queries import claimed_batch

    db.session.execute(sa.text("UPDATE notification_deliveries SET status = 'sending' WHERE id = :id"),
                       {"id": delivery.id})  # fmt: skip
    (row,) = claimed_batch([delivery.id])
    return row


@pytest.mark.committed  # the dashboard ends its read with a rollback
def test_slack_refusing_the_bot_token_shows_on_the_dashboard_until_a_post_works(app, client, login_as, chat):
    from app.providers import PermanentError
    from app.providers.chat_content import ChatContent, ChatTarget
    from app.providers.chatfanout import ChatFanout
    from app.providers.slack import SlackProvider
    from tests.support.html import one, parse

    slack, _ = chat
    login_as(UserFactory(role="operator"))
    db.session.commit()
    slack.script("C0DASH001", "invalid_auth", times=1)
    content = ChatContent("Hi", "there", text="Hi")
    message = Message(1, "chat", "user:1", "Hi", "Hi", targets=(ChatTarget.of("slack", {"channel": "C0DASH001"}),),
                      chat=content)  # fmt: skip
    with ChatFanout([SlackProvider(app.config)]) as fanout, pytest.raises(PermanentError):
        fanout.send(message)
    problem = one(client.get("/console/dashboard/live").get_data(as_text=True), "#provider-problem-slack")
    assert "invalid_auth" in problem.get_text()
    with ChatFanout([SlackProvider(app.config)]) as fanout:
        fanout.send(message)
    assert parse(client.get("/console/dashboard/live").get_data(as_text=True)).select("#provider-problem-slack") == []


@pytest.mark.parametrize(
    "settings, problem",
    [
        ({"CHAT_PROVIDER": "slack,telegram"}, "no chat provider called telegram"),
        ({"CHAT_PROVIDER": "line"}, "LINE_CHANNEL_ACCESS_TOKEN is empty"),
        ({"CHAT_PROVIDER": "slack", "SLACK_API_BASE": "http://slack.example/api/"}, "SLACK_API_BASE"),
        ({"CHAT_PROVIDER": "slack", "SLACK_BOT_TOKEN": "xoxp-user-token"}, "not a bot token"),
        ({"CHAT_PROVIDER": "discord", "CHAT_WEBHOOK_CA_FILE": "/nonexistent.pem"}, "CHAT_WEBHOOK_CA_FILE"),
        ({"CHAT_PROVIDER": "discord", "CHAT_ALLOWED_HOSTS": " , "}, "CHAT_ALLOWED_HOSTS is empty"),
    ],
)
def test_chat_settings_that_cannot_work_stop_the_start(app, settings, problem):
    from app.config import check

    assert any(problem in found for found in check({**app.config, **settings}))
    assert not [
        p for p in check({**app.config, "CHAT_PROVIDER": "slack,msteams,discord"}) if "CHAT" in p or "SLACK" in p
    ]


@pytest.mark.committed
def test_the_delivery_log_names_the_account_a_sent_row_did_not_reach(app, client, login_as, chat):
    slack, _ = chat
    slack.script("U0GONE002", "channel_not_found")
    delivery = chat_row(member(slack="U0GONE002"))
    deliver_batch("chat", [delivery.id])
    login_as(UserFactory(role="operator", email="ops@example.com", locale="en"))

    page = client.get(f"/console/deliveries/{delivery.id}").get_data(as_text=True)
    listed = client.get("/console/deliveries?channel=chat").get_data(as_text=True)

    assert "Not reached" in page and "slack:U0GONE002 permanent" in page  # beside the state, and on the try
    assert "Not reached: 1/2 · slack:U0GONE002" in page
    assert "not every account took it: 1/2 · slack:U0GONE002" in listed
