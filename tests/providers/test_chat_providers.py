"""Slack, LINE, Teams and Discord against local stand-ins that speak their APIs (tests/support/*_server.py).

Each provider is driven as the engine drives it (ChatFanout.send with the member's ChatTargets) and the
stand-ins check what real services check: the request's shape, the token, the retry key, the card's envelope.
"""

from __future__ import annotations

import json

import pytest

from app.providers import problems
from app.providers.base import Message, PermanentError, TransientError
from app.providers.chat_content import ChatContent, ChatTarget
from app.providers.chatfanout import ACCOUNT_INVALID, ChatFanout
from app.providers.discord import DiscordProvider
from app.providers.line import LineProvider, retry_key
from app.providers.msteams import ADAPTIVE, TeamsProvider
from app.providers.slack import SlackProvider
from tests.support.chat_webhooks_server import ChatWebhooksServer
from tests.support.line_server import LineServer
from tests.support.slack_server import SlackServer

LINE_USER = "U" + "4af4980629" * 3 + "ab"
CONTENT = ChatContent(title="Ann replied", body="Nice photo! <@here> & more", link="https://hato.test/posts/1",
                      text="Ann replied\nNice photo!\nhttps://hato.test/posts/1")  # fmt: skip


@pytest.fixture
def slack():
    with SlackServer() as server:
        yield server


@pytest.fixture
def line():
    with LineServer() as server:
        yield server


@pytest.fixture
def hooks():
    with ChatWebhooksServer() as server:
        yield server


def settings(app, *servers, **overrides) -> dict:
    """The app's settings pointed at the stand-ins (loopback, so the local-testing switches are on)."""
    config = {**app.config, "CHAT_PROVIDER": "slack,msteams,discord,line", "CHAT_ALLOWED_HOSTS": "127.0.0.1",
              "CHAT_ALLOW_HTTP_ENDPOINTS": True, "CHAT_ALLOW_PRIVATE_ADDRESSES": True}  # fmt: skip
    for server in servers:
        config |= (
            server.settings()
            if not isinstance(server, ChatWebhooksServer)
            else {"CHAT_WEBHOOK_CA_FILE": server.ca_path}
        )
    return config | overrides


def message(*targets: ChatTarget, delivery_id: int = 7, content: ChatContent = CONTENT) -> Message:
    return Message(delivery_id=delivery_id, channel="chat", to="user:1", subject=content.title, text=content.text,
                   targets=targets, chat=content)  # fmt: skip


def send(part, *targets: ChatTarget, **kwargs):
    with ChatFanout([part]) as fanout:
        return fanout.send(message(*targets, **kwargs))


# -- Slack


def test_a_slack_dm_is_chat_post_message_with_the_bot_token_blocks_and_escaped_fallback_text(app, slack):
    receipt = send(SlackProvider(settings(app, slack)), ChatTarget.of("slack", {"channel": "U0MEMBER1"}))

    (posted,) = slack.received
    assert posted.headers["authorization"] == f"Bearer {slack.token}"
    assert posted.channel == "U0MEMBER1"
    assert posted.text == "Ann replied\nNice photo!\nhttps://hato.test/posts/1"
    (section,) = posted.blocks
    assert section["text"]["text"] == "*<https://hato.test/posts/1|Ann replied>*\nNice photo! &lt;@here&gt; &amp; more"
    assert receipt.provider == "slack" and receipt.message_id == posted.ts
    assert receipt.reached == ("slack:U0MEMBER1",)


def test_the_operators_block_kit_goes_instead_of_the_default_section(app, slack):
    blocks = [{"type": "header", "text": {"type": "plain_text", "text": "Order shipped"}}]
    content = ChatContent("Order shipped", "", text="Order shipped", slack_blocks=blocks)
    send(SlackProvider(settings(app, slack)), ChatTarget.of("slack", {"channel": "C0ALERTS1"}), content=content)
    assert slack.received[0].blocks == blocks and slack.received[0].text == "Order shipped"


def test_a_slack_incoming_webhook_gets_the_same_json_over_the_guarded_transport(app, slack):
    url = slack.webhook_url("ops")
    receipt = send(SlackProvider(settings(app, slack)), ChatTarget.of("slack", {"webhook_url": url}))
    (hooked,) = slack.webhook_received
    assert hooked.body["text"].startswith("Ann replied") and hooked.body["blocks"][0]["type"] == "section"
    assert receipt.reached[0].startswith("slack:hook:") and url not in receipt.reached[0]  # the URL is a secret


@pytest.mark.parametrize("error", ["channel_not_found", "not_in_channel", "is_archived"])
def test_a_slack_channel_that_is_gone_invalidates_the_account(app, slack, error):
    slack.script("C0GONE001", error)
    target = ChatTarget.of("slack", {"channel": "C0GONE001"})
    with pytest.raises(PermanentError) as raised:
        send(SlackProvider(settings(app, slack)), target)
    assert raised.value.kind == ACCOUNT_INVALID
    (outcome,) = raised.value.outcomes
    assert (outcome.target, outcome.outcome) == (target.key, "permanent") and error in outcome.invalid


@pytest.mark.parametrize("error", ["invalid_auth", "not_authed", "token_revoked", "account_inactive"])
def test_a_refused_bot_token_is_a_configuration_error_on_the_dashboard_until_a_post_works(app, slack, error):
    slack.script("C0ANY0001", error, times=1)
    provider = SlackProvider(settings(app, slack))
    target = ChatTarget.of("slack", {"channel": "C0ANY0001"})
    with pytest.raises(PermanentError) as raised:
        send(provider, target)
    assert raised.value.kind == "misconfigured" and raised.value.outcomes[0].invalid is None  # no account blamed
    (problem,) = problems.current(["slack"])
    assert error in problem.text
    send(provider, target)
    assert problems.current(["slack"]) == []


def test_slack_ratelimited_is_transient_with_its_retry_after(app, slack):
    slack.script("C0BUSY001", "ratelimited", retry_after=7, times=1)
    with pytest.raises(TransientError) as raised:
        send(SlackProvider(settings(app, slack)), ChatTarget.of("slack", {"channel": "C0BUSY001"}))
    assert (raised.value.kind, raised.value.retry_after) == ("rate_limited", 7.0)
    assert raised.value.outcomes[0].retry_after == 7.0  # the channel's own pause (its scope's gate)


def test_one_slack_channel_is_paced_at_a_message_a_second(app, slack):
    provider = SlackProvider(settings(app, slack, RATE_LIMIT_MAX_WAIT_SECONDS=0))
    target = ChatTarget.of("slack", {"channel": "C0PACED01"})
    send(provider, target)
    with pytest.raises(TransientError) as raised:
        send(provider, target)
    assert raised.value.kind == "rate_limited" and 0 < raised.value.retry_after <= 1
    send(provider, ChatTarget.of("slack", {"channel": "C0OTHER01"}))  # another channel has its own bucket
    assert [p.channel for p in slack.received] == ["C0PACED01", "C0OTHER01"]


def test_a_removed_slack_webhook_invalidates_the_account(app, slack):
    url = slack.webhook_url("old")
    slack.remove_webhook("old")
    with pytest.raises(PermanentError) as raised:
        send(SlackProvider(settings(app, slack)), ChatTarget.of("slack", {"webhook_url": url}))
    assert raised.value.kind == ACCOUNT_INVALID and "no_service" in str(raised.value)
    assert url not in str(raised.value)


# -- LINE


def test_a_line_push_carries_the_token_and_a_retry_key_from_the_delivery(app, line):
    receipt = send(LineProvider(settings(app, line)), ChatTarget.of("line", {"user_id": LINE_USER}), delivery_id=41)
    (pushed,) = line.received
    assert pushed.headers["authorization"] == f"Bearer {line.token}"
    assert pushed.retry_key == retry_key(41, LINE_USER)
    assert pushed.messages == [{"type": "text", "text": CONTENT.text}]
    assert receipt.message_id == pushed.sent[0]["id"] and receipt.reached == (f"line:{LINE_USER}",)


def test_a_retry_of_the_same_delivery_sends_the_same_key_and_line_shows_it_once(app, line):
    line.script(LINE_USER, 500, after_delivery=True, times=1)  # LINE took it, then the answer was an error
    provider = LineProvider(settings(app, line))
    target = ChatTarget.of("line", {"user_id": LINE_USER})
    with pytest.raises(TransientError):
        send(provider, target, delivery_id=42)
    receipt = send(provider, target, delivery_id=42)  # the engine's retry: 409 = accepted before = sent

    assert line.conflicts == 1 and len(line.received) == 1
    assert receipt.message_id == line.received[0].sent[0]["id"]
    send(provider, target, delivery_id=43)  # another delivery: another key, another message
    assert len(line.received) == 2 and line.received[1].retry_key != line.received[0].retry_key


def test_the_operators_flex_message_goes_with_the_text_as_alt_text(app, line):
    flex = {"type": "bubble", "body": {"type": "box", "layout": "vertical",
                                       "contents": [{"type": "text", "text": "Order shipped"}]}}  # fmt: skip
    content = ChatContent("Order shipped", "", text="Your order shipped", line_flex=flex)
    send(LineProvider(settings(app, line)), ChatTarget.of("line", {"user_id": LINE_USER}), content=content)
    (sent,) = line.received[0].messages
    assert (sent["type"], sent["altText"], sent["contents"]["type"]) == ("flex", "Your order shipped", "bubble")


def test_a_line_user_id_line_refuses_invalidates_the_account(app, line):
    line.script(LINE_USER, 400, "The property, 'to', in the request body is invalid (line: -, column: -)")
    with pytest.raises(PermanentError) as raised:
        send(LineProvider(settings(app, line)), ChatTarget.of("line", {"user_id": LINE_USER}))
    assert raised.value.kind == ACCOUNT_INVALID and raised.value.outcomes[0].invalid
    assert LINE_USER not in str(raised.value)  # a LINE user id is personal data: its end only


def test_a_wrong_line_token_is_a_configuration_error_on_the_dashboard(app, line):
    with pytest.raises(PermanentError) as raised:
        send(LineProvider(settings(app, line, LINE_CHANNEL_ACCESS_TOKEN="wrong")),
             ChatTarget.of("line", {"user_id": LINE_USER}))  # fmt: skip
    assert raised.value.kind == "misconfigured" and "LINE 401" in str(raised.value)
    assert "401" in problems.current(["line"])[0].text
    send(LineProvider(settings(app, line)), ChatTarget.of("line", {"user_id": LINE_USER}))
    assert problems.current(["line"]) == []


def test_line_429_is_transient(app, line):
    line.script(LINE_USER, 429, times=1)
    with pytest.raises(TransientError) as raised:
        send(LineProvider(settings(app, line)), ChatTarget.of("line", {"user_id": LINE_USER}))
    assert raised.value.kind == "rate_limited" and line.received == []


# -- Microsoft Teams


def test_teams_gets_an_adaptive_card_message_over_tls(app, hooks):
    url = hooks.url_for("teams", "sales")
    receipt = send(TeamsProvider(settings(app, hooks)), ChatTarget.of("msteams", {"webhook_url": url}))
    (received,) = hooks.received_at(url)
    (attachment,) = received.body["attachments"]
    assert received.body["type"] == "message" and attachment["contentType"] == ADAPTIVE
    card = attachment["content"]
    assert (card["type"], card["version"]) == ("AdaptiveCard", "1.4")
    container = card["body"][0]
    assert [item["text"] for item in container["items"]] == ["Ann replied", "Nice photo! <@here> & more"]
    assert container["selectAction"] == {"type": "Action.OpenUrl", "url": "https://hato.test/posts/1"}
    assert receipt.provider == "msteams" and receipt.message_id  # the flow run's id


def test_a_deleted_teams_flow_invalidates_and_a_throttled_one_waits(app, hooks):
    gone, busy = hooks.url_for("teams", "gone"), hooks.url_for("teams", "busy")
    hooks.remove("teams", "gone")
    hooks.script(busy, 429, retry_after=12, times=1)
    provider = TeamsProvider(settings(app, hooks))
    with pytest.raises(PermanentError) as raised:
        send(provider, ChatTarget.of("msteams", {"webhook_url": gone}))
    assert raised.value.kind == ACCOUNT_INVALID and " 404" in str(raised.value)
    with pytest.raises(TransientError) as raised:
        send(provider, ChatTarget.of("msteams", {"webhook_url": busy}))
    assert (raised.value.kind, raised.value.retry_after) == ("rate_limited", 12.0)


# -- Discord


def test_discord_gets_an_embed_with_wait_true_and_no_mentions(app, hooks):
    url = hooks.url_for("discord", "guild")
    receipt = send(DiscordProvider(settings(app, hooks)), ChatTarget.of("discord", {"webhook_url": url}))
    (received,) = hooks.received_at(url)
    assert received.query == {"wait": "true"}
    assert received.body == {
        "embeds": [{"title": "Ann replied", "description": "Nice photo! <@here> & more",
                    "url": "https://hato.test/posts/1"}],
        "allowed_mentions": {"parse": []},
    }  # fmt: skip
    assert receipt.message_id == received.message_id


def test_an_unknown_discord_webhook_invalidates_and_a_429_waits_its_retry_after(app, hooks):
    gone, busy = hooks.url_for("discord", "gone"), hooks.url_for("discord", "busy")
    hooks.remove("discord", "gone")
    hooks.script(busy, 429, retry_after=3, times=1)
    provider = DiscordProvider(settings(app, hooks))
    with pytest.raises(PermanentError) as raised:
        send(provider, ChatTarget.of("discord", {"webhook_url": gone}))
    assert raised.value.kind == ACCOUNT_INVALID and "10015" in str(raised.value)
    with pytest.raises(TransientError) as raised:
        send(provider, ChatTarget.of("discord", {"webhook_url": busy}))
    assert (raised.value.kind, raised.value.retry_after) == ("rate_limited", 3.0)


# -- one member, several accounts; and the SSRF rule


def test_every_account_of_the_member_gets_it_and_one_that_failed_for_now_waits_alone(app, slack, line, hooks):
    config = settings(app, slack, line, hooks)
    line.script(LINE_USER, 500, times=1)
    targets = (ChatTarget.of("slack", {"channel": "U0MEMBER1"}), ChatTarget.of("line", {"user_id": LINE_USER}),
               ChatTarget.of("discord", {"webhook_url": hooks.url_for("discord")}))  # fmt: skip
    parts = [SlackProvider(config), LineProvider(config), DiscordProvider(config)]
    with ChatFanout(parts) as fanout:
        receipt = fanout.send(message(*targets))
    assert set(receipt.reached) == {targets[0].key, targets[2].key}
    assert {o.target: o.outcome for o in receipt.outcomes}[targets[1].key] == "transient"
    assert set(receipt.provider.split("+")) == {"slack", "discord"}


def test_production_settings_refuse_a_loopback_webhook_before_connecting(app, hooks):
    url = hooks.url_for("discord", "inside")
    # The host is allowed by name, but it is a loopback address: the guarded transport refuses it.
    config = settings(app, hooks, CHAT_ALLOW_HTTP_ENDPOINTS=False, CHAT_ALLOW_PRIVATE_ADDRESSES=False)
    inside = ChatTarget.of("discord", {"webhook_url": url.replace(hooks.origin, "https://127.0.0.1")})
    with pytest.raises(PermanentError) as raised:
        send(DiscordProvider(config), inside)
    assert raised.value.kind == ACCOUNT_INVALID and "loopback" in str(raised.value)
    with pytest.raises(PermanentError) as raised:  # a host outside CHAT_ALLOWED_HOSTS (the defaults)
        send(DiscordProvider({**config, "CHAT_ALLOWED_HOSTS": "discord.com"}),
             ChatTarget.of("discord", {"webhook_url": "https://localhost/api/webhooks/1/x"}))  # fmt: skip
    assert "CHAT_ALLOWED_HOSTS" in str(raised.value)
    assert hooks.received == []


def test_a_target_key_names_no_secret_and_survives_a_round_trip():
    url = "https://discord.com/api/webhooks/1/secret-token"
    target = ChatTarget.of("discord", {"webhook_url": url})
    assert "secret-token" not in target.key and target.data == {"webhook_url": url}
    assert ChatTarget.of("discord", json.loads(target.data_json)).key == target.key


def test_an_allowed_name_that_resolves_to_loopback_is_refused_by_the_transport(app):
    # The URL passes the allow-list by name; the guarded transport checks the address it resolves to.
    config = {**app.config, "CHAT_ALLOWED_HOSTS": "localhost", "CHAT_ALLOW_HTTP_ENDPOINTS": False,
              "CHAT_ALLOW_PRIVATE_ADDRESSES": False}  # fmt: skip
    target = ChatTarget.of("msteams", {"webhook_url": "https://localhost/workflows/abc?sig=x"})
    with pytest.raises(PermanentError) as raised:
        send(TeamsProvider(config), target)
    assert raised.value.kind == ACCOUNT_INVALID and "loopback" in str(raised.value)
    assert raised.value.outcomes[0].invalid  # the account is invalidated: it can never be posted to


def test_an_account_at_its_rate_limit_waits_while_the_members_others_get_it(app, slack, line):
    config = settings(app, slack, line, RATE_LIMIT_MAX_WAIT_SECONDS=0)
    busy = ChatTarget.of("slack", {"channel": "C0SHARED1"})
    phone = ChatTarget.of("line", {"user_id": LINE_USER})
    with ChatFanout([SlackProvider(config), LineProvider(config)]) as fanout:
        fanout.send(message(busy))  # the shared channel's token for this second
        receipt = fanout.send(message(busy, phone, delivery_id=8))
    assert receipt.reached == (phone.key,)
    (held,) = [o for o in receipt.outcomes if o.target == busy.key]
    assert held.outcome == "transient" and 0 < held.retry_after <= 1  # the row comes back for the channel alone
    assert len(slack.received) == 1 and len(line.received) == 1
