"""The chat stand-ins answer as Slack, LINE, Discord and Teams do, driven by the official SDKs (or httpx)."""

from __future__ import annotations

import json
import re
import signal
import ssl
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from linebot.v3.messaging import (
    ApiClient,
    ApiException,
    Configuration,
    MessagingApi,
    PushMessageRequest,
    TextMessage,
)
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.webhook import WebhookClient

from tests.support.chat_webhooks_server import ChatWebhooksServer
from tests.support.line_server import LineServer
from tests.support.slack_server import SlackServer
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
USER = "U" + "4af4980629" * 3 + "ab"  # a LINE user id: U and 32 hex digits


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


def _web(slack: SlackServer, token: str | None = None) -> WebClient:
    return WebClient(token=token or slack.token, base_url=slack.api_base, timeout=5)


# -- Slack


def test_slack_post_message_is_received_and_answered_as_slack(slack):
    answer = _web(slack).chat_postMessage(
        channel="C0ALERTS01",
        text="Reservation #331 was approved",
        blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "*#331*"}}],
    )
    assert answer["ok"] is True and answer["channel"] == "C0ALERTS01"
    assert answer["message"]["text"] == "Reservation #331 was approved" and answer["message"]["ts"] == answer["ts"]
    [posted] = slack.received
    assert (posted.channel, posted.ts, posted.text) == ("C0ALERTS01", answer["ts"], "Reservation #331 was approved")
    assert posted.blocks[0]["type"] == "section"
    assert posted.headers["authorization"] == f"Bearer {slack.token}"
    assert "warning" not in answer.data  # slack_sdk sends the charset Slack wants


def test_slack_timestamps_are_unique_per_post(slack):
    client = _web(slack)
    stamps = {client.chat_postMessage(channel="C0ALERTS01", text=f"n{i}")["ts"] for i in range(3)}
    assert len(stamps) == 3


@pytest.mark.parametrize("error", ["channel_not_found", "not_in_channel", "account_inactive", "invalid_auth"])
def test_slack_scripted_errors_raise_slack_api_error_with_its_name(slack, error):
    slack.script("C0GONE0001", error, times=1)
    with pytest.raises(SlackApiError) as raised:
        _web(slack).chat_postMessage(channel="C0GONE0001", text="hello")
    assert raised.value.response.status_code == 200 and raised.value.response["ok"] is False
    assert raised.value.response["error"] == error
    assert _web(slack).chat_postMessage(channel="C0GONE0001", text="again")["ok"]  # times=1: then normal
    assert [p.text for p in slack.received] == ["again"]
    assert slack.rejected == [("C0GONE0001", error)]


def test_slack_refuses_a_wrong_token_and_a_message_without_text(slack):
    with pytest.raises(SlackApiError) as raised:
        _web(slack, token="xoxb-0-0-wrong").chat_postMessage(channel="C0ALERTS01", text="x")
    assert raised.value.response["error"] == "invalid_auth"
    with pytest.raises(SlackApiError) as raised:
        _web(slack).api_call("chat.postMessage", json={"channel": "C0ALERTS01"})
    assert raised.value.response["error"] == "no_text"
    with pytest.raises(SlackApiError) as raised:
        _web(slack).chat_postMessage(channel="C0ALERTS01", text="x" * 40_001)
    assert raised.value.response["error"] == "msg_too_long"
    assert slack.received == []


def test_slack_accepts_form_posts_as_the_web_api_does(slack):
    answer = httpx.post(
        f"{slack.api_base}chat.postMessage",
        timeout=5,
        data={"token": slack.token, "channel": "C0FORM0001", "text": "from a form"},
    )
    assert answer.json()["ok"] is True
    assert slack.received[0].text == "from a form"


def test_slack_ratelimited_is_a_429_with_retry_after(slack):
    slack.script("C0BUSY0001", "ratelimited", retry_after=7, times=1)
    with pytest.raises(SlackApiError) as raised:
        _web(slack).chat_postMessage(channel="C0BUSY0001", text="hello")
    response = raised.value.response
    assert response.status_code == 429 and response["error"] == "ratelimited"
    assert response.headers["Retry-After"] == "7"


def test_slack_enforced_rate_is_one_message_a_second_per_channel():
    with SlackServer(enforce_rate=True) as slack:
        client = _web(slack)
        client.chat_postMessage(channel="C0FAST0001", text="first")
        client.chat_postMessage(channel="C0FAST0002", text="another channel")
        with pytest.raises(SlackApiError) as raised:
            client.chat_postMessage(channel="C0FAST0001", text="second within the second")
        assert raised.value.response.status_code == 429 and raised.value.response.headers["Retry-After"] == "1"
        assert [p.text for p in slack.received] == ["first", "another channel"]


def test_slack_incoming_webhook_answers_ok_and_slacks_errors(slack):
    url = slack.webhook_url("ops")
    client = WebhookClient(url, timeout=5)
    answer = client.send(text="Deploy finished", blocks=[{"type": "divider"}])
    assert (answer.status_code, answer.body) == (200, "ok")
    assert slack.webhook_received[0].body["text"] == "Deploy finished"

    no_text = client.send_dict({"blocks": [], "unfurl_links": False})
    assert (no_text.status_code, no_text.body) == (400, "no_text")
    assert client.send_dict({}).body == "invalid_payload"  # slack_sdk sends an empty body as JSON null
    slack.script("ops", "action_prohibited", times=1)
    assert (client.send(text="x").status_code, client.send(text="y").status_code) == (403, 200)
    bad = httpx.post(url, content=b"{not json", headers={"Content-Type": "application/json"}, timeout=5)
    assert (bad.status_code, bad.text) == (400, "invalid_payload")
    wrong_secret = url.rsplit("/", 1)[0] + "/wrongsecret"
    assert (WebhookClient(wrong_secret).send(text="x").status_code) == 403
    slack.remove_webhook("ops")
    gone = client.send(text="after removal")
    assert (gone.status_code, gone.body) == (404, "no_service")
    assert [h.body.get("text") for h in slack.webhook_received] == ["Deploy finished", "y"]


def test_slack_settings_reach_the_stand_in(slack):
    settings = slack.settings()
    assert settings["SLACK_API_BASE"].startswith("http://127.0.0.1:") and settings["SLACK_API_BASE"].endswith("/api/")
    assert settings["SLACK_BOT_TOKEN"].startswith("xoxb-")
    client = WebClient(token=settings["SLACK_BOT_TOKEN"], base_url=settings["SLACK_API_BASE"], timeout=5)
    assert client.auth_test()["bot_id"]


# -- LINE


def _line_api(line: LineServer, token: str | None = None):
    client = ApiClient(Configuration(host=line.settings()["LINE_API_BASE"], access_token=token or line.token))
    return client, MessagingApi(client)


def _push(text: str, to: str = USER) -> PushMessageRequest:
    return PushMessageRequest(to=to, messages=[TextMessage(text=text)])


def test_line_push_is_delivered_and_answered_with_sent_messages(line):
    client, api = _line_api(line)
    with client:
        answer = api.push_message_with_http_info(_push("Reservation #331 was approved"),
                                                 x_line_retry_key=str(uuid.uuid4()))  # fmt: skip
    assert answer.status_code == 200
    assert len(answer.data.sent_messages) == 1 and answer.data.sent_messages[0].quote_token
    [pushed] = line.received
    assert pushed.to == USER and pushed.messages == [{"type": "text", "text": "Reservation #331 was approved"}]
    assert answer.headers["x-line-request-id"] == pushed.request_id
    assert pushed.headers["authorization"] == f"Bearer {line.token}"


def test_line_same_retry_key_twice_is_a_409_and_one_delivery(line):
    key = str(uuid.uuid4())
    client, api = _line_api(line)
    with client:
        first = api.push_message_with_http_info(_push("once"), x_line_retry_key=key)
        with pytest.raises(ApiException) as raised:
            api.push_message_with_http_info(_push("once"), x_line_retry_key=key)
    assert raised.value.status == 409
    assert raised.value.headers["x-line-accepted-request-id"] == first.headers["x-line-request-id"]
    body = json.loads(raised.value.body)
    assert body["message"] == "The retry key is already accepted"
    assert body["sentMessages"][0]["id"] == first.data.sent_messages[0].id
    assert len(line.received) == 1 and line.conflicts == 1


def test_line_lost_answer_then_retry_with_the_key_delivers_once(line):
    line.script(USER, 500, times=1, after_delivery=True)
    key = str(uuid.uuid4())
    client, api = _line_api(line)
    with client:
        with pytest.raises(ApiException) as raised:
            api.push_message_with_http_info(_push("maybe sent"), x_line_retry_key=key)
        assert raised.value.status == 500
        with pytest.raises(ApiException) as retried:
            api.push_message_with_http_info(_push("maybe sent"), x_line_retry_key=key)
    assert retried.value.status == 409
    assert [p.messages[0]["text"] for p in line.received] == ["maybe sent"]


@pytest.mark.parametrize(("status", "message"), [
    (400, "Failed to send messages"),
    (403, "Access to this API is not available for your account"),
    (429, "The API rate limit has been exceeded. Try again later."),
])  # fmt: skip
def test_line_scripted_statuses_raise_api_exception_with_lines_message(line, status, message):
    line.script(USER, status, times=1)
    key = str(uuid.uuid4())
    client, api = _line_api(line)
    with client:
        with pytest.raises(ApiException) as raised:
            api.push_message_with_http_info(_push("hello"), x_line_retry_key=key)
        assert raised.value.status == status and json.loads(raised.value.body)["message"] == message
        assert api.push_message_with_http_info(_push("hello"), x_line_retry_key=key).status_code == 200
    assert len(line.received) == 1  # a refused request does not use up its retry key


def test_line_refuses_a_bad_token_and_a_bad_recipient(line):
    client, api = _line_api(line, token="not-the-token")
    with client, pytest.raises(ApiException) as raised:
        api.push_message_with_http_info(_push("hello"))
    assert raised.value.status == 401
    assert json.loads(raised.value.body)["message"].startswith("Authentication failed")
    client, api = _line_api(line)
    with client, pytest.raises(ApiException) as raised:
        api.push_message_with_http_info(_push("hello", to="kutemukan"))
    assert raised.value.status == 400
    assert "'to'" in json.loads(raised.value.body)["message"]
    assert line.received == []


def test_line_validates_the_body_as_line_does(line):
    url = f"{line.origin}/v2/bot/message/push"
    auth = {"Authorization": f"Bearer {line.token}"}
    six = {"to": USER, "messages": [{"type": "text", "text": str(i)} for i in range(6)]}
    answer = httpx.post(url, json=six, headers=auth, timeout=5)
    assert answer.status_code == 400 and answer.headers["x-line-request-id"]
    assert answer.json() == {
        "message": "The request body has 1 error(s)",
        "details": [{"message": "Size must be between 1 and 5", "property": "messages"}],
    }
    empty_text = {"to": USER, "messages": [{"type": "text", "text": ""}, {"type": "flex", "altText": "a"}]}
    details = httpx.post(url, json=empty_text, headers=auth, timeout=5).json()["details"]
    assert [d["property"] for d in details] == ["messages[0].text", "messages[1].contents"]
    flex = {
        "type": "flex",
        "altText": "Approved",
        "contents": {"type": "bubble", "body": {"type": "box", "layout": "vertical", "contents": []}},
    }
    ok = httpx.post(url, json={"to": USER, "messages": [flex]}, headers=auth | {"X-Line-Retry-Key": "nope"}, timeout=5)
    assert ok.status_code == 400  # a retry key must be a UUID
    ok = httpx.post(url, json={"to": USER, "messages": [flex]}, headers=auth, timeout=5)
    assert ok.status_code == 200 and line.received[0].messages == [flex]


# -- Discord and Teams


def _https(hooks: ChatWebhooksServer) -> httpx.Client:
    return httpx.Client(verify=ssl.create_default_context(cafile=hooks.ca_path), timeout=5)


def test_discord_execute_webhook_204_or_the_message_with_wait(hooks):
    url = hooks.url_for("discord", "alerts")
    assert url.startswith("https://127.0.0.1:") and "/api/webhooks/" in url
    with _https(hooks) as client:
        quiet = client.post(url, json={"content": "Deploy finished"})
        loud = client.post(url, params={"wait": "true"}, json={"embeds": [{"title": "Reservation #331"}]})
    assert quiet.status_code == 204 and quiet.content == b""
    assert quiet.headers["X-RateLimit-Limit"] == "5" and "X-RateLimit-Bucket" in quiet.headers
    assert loud.status_code == 200
    message = loud.json()
    assert message["embeds"][0]["title"] == "Reservation #331" and message["webhook_id"] in url
    assert [r.body for r in hooks.received_at(url)] == [
        {"content": "Deploy finished"},
        {"embeds": [{"title": "Reservation #331"}]},
    ]
    assert hooks.received_at(url)[1].message_id == message["id"]


def test_discord_refusals_are_discords_json_errors(hooks):
    url = hooks.url_for("discord")
    with _https(hooks) as client:
        empty = client.post(url, json={"content": ""})
        long = client.post(url, json={"content": "x" * 2001})
        bad = client.post(url, content=b"{", headers={"Content-Type": "application/json"})
        wrong = client.post(url.rsplit("/", 1)[0] + "/not-the-token", json={"content": "x"})
        hooks.remove("discord")
        gone = client.post(url, json={"content": "x"})
    assert (empty.status_code, empty.json()) == (400, {"message": "Cannot send an empty message", "code": 50006})
    assert long.status_code == 400 and long.json()["code"] == 50035
    assert long.json()["errors"]["content"]["_errors"][0]["code"] == "BASE_TYPE_MAX_LENGTH"
    assert bad.json()["code"] == 50109 and wrong.status_code == 401
    assert (gone.status_code, gone.json()) == (404, {"message": "Unknown Webhook", "code": 10015})
    assert hooks.received == []


def test_discord_scripted_429_carries_retry_after_and_rate_limit_headers(hooks):
    url = hooks.url_for("discord")
    hooks.script(url, 429, retry_after=2.5, times=1)
    with _https(hooks) as client:
        limited = client.post(url, json={"content": "x"})
        after = client.post(url, json={"content": "y"})
    assert limited.status_code == 429
    assert limited.json() == {"message": "You are being rate limited.", "retry_after": 2.5, "global": False}
    assert limited.headers["Retry-After"] == "3" and limited.headers["X-RateLimit-Remaining"] == "0"
    assert limited.headers["X-RateLimit-Scope"] == "shared"
    assert after.status_code == 204 and [r.body["content"] for r in hooks.received] == ["y"]


def test_discord_enforced_rate_is_five_per_two_seconds_per_webhook():
    with ChatWebhooksServer(enforce_rate=True) as hooks, _https(hooks) as client:
        url, other = hooks.url_for("discord", "a"), hooks.url_for("discord", "b")
        statuses = [client.post(url, json={"content": str(i)}).status_code for i in range(6)]
        assert statuses == [204] * 5 + [429]
        assert client.post(other, json={"content": "other"}).status_code == 204


CARD = {
    "type": "message",
    "attachments": [
        {
            "contentType": "application/vnd.microsoft.card.adaptive",
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.4",
                "body": [{"type": "TextBlock", "text": "Deploy finished"}],
            },
        }
    ],
}


def test_teams_workflow_accepts_an_adaptive_card_with_202(hooks):
    url = hooks.url_for("teams", "ops")
    assert "/workflows/" in url and "sig=" in url
    with _https(hooks) as client:
        answer = client.post(url, json=CARD)
    assert answer.status_code == 202 and answer.content == b"" and answer.headers["x-ms-workflow-run-id"]
    [got] = hooks.received_at(url)
    assert got.kind == "teams" and got.body == CARD


def test_teams_workflow_refuses_bad_cards_wrong_sig_and_removed_flows(hooks):
    url = hooks.url_for("teams")
    not_a_card = json.loads(json.dumps(CARD))
    not_a_card["attachments"][0]["content"]["type"] = "MessageCard"
    with _https(hooks) as client:
        invalid = client.post(url, json=not_a_card)
        text = client.post(url, content=b"hello", headers={"Content-Type": "text/plain"})
        wrong = client.post(url.replace("sig=", "sig=x"), json=CARD)
        hooks.script(url, 429, retry_after=4, times=1)
        busy = client.post(url, json=CARD)
        hooks.remove("teams")
        gone = client.post(url, json=CARD)
    assert invalid.status_code == 400 and "AdaptiveCard" in invalid.json()["error"]["message"]
    assert text.status_code == 400 and text.json()["error"]["code"] == "InvalidRequestContent"
    assert wrong.status_code == 401
    assert busy.status_code == 429 and busy.headers["Retry-After"] == "4"
    assert gone.status_code == 404
    assert hooks.received == []


def test_teams_workflow_without_strict_cards_accepts_then_fails_the_run():
    with ChatWebhooksServer(strict_cards=False) as hooks, _https(hooks) as client:
        url = hooks.url_for("teams")
        answer = client.post(url, json={"type": "message", "text": "no attachments"})
        assert answer.status_code == 202  # as the real trigger: the flow's run fails afterwards
        assert hooks.received == [] and len(hooks.failed_runs) == 1


def test_the_https_server_is_only_trusted_with_its_ca(hooks):
    with httpx.Client(timeout=5) as client, pytest.raises(httpx.ConnectError):
        client.post(hooks.url_for("discord"), json={"content": "x"})


# -- on their own (`make run`)


def _serve(module: str, directory: Path) -> tuple[subprocess.Popen, dict]:
    """Start a stand-in on a free port; it and the settings it wrote once it listens."""
    settings_file = directory / "settings.json"
    settings_file.unlink(missing_ok=True)
    argv = [sys.executable, "-m", module, "--port", "0", "--dir", str(directory)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: settings_file.exists() or proc.poll() is not None, 30, f"{module} to write settings.json")
    assert proc.poll() is None, proc.stdout.read()
    return proc, json.loads(settings_file.read_text())


def _portless(settings: dict) -> dict:
    return {k: re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1", v) for k, v in settings.items()}


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0, output
    return output


def _post_slack(settings: dict) -> None:
    client = WebClient(token=settings["SLACK_BOT_TOKEN"], base_url=settings["SLACK_API_BASE"], timeout=5)
    assert client.chat_postMessage(channel="C0DEMO0001", text="demo")["ok"]
    assert WebhookClient(settings["SLACK_WEBHOOK_URL"], timeout=5).send(text="hook").body == "ok"


def _post_line(settings: dict) -> None:
    config = Configuration(host=settings["LINE_API_BASE"], access_token=settings["LINE_CHANNEL_ACCESS_TOKEN"])
    with ApiClient(config) as client:
        assert MessagingApi(client).push_message_with_http_info(_push("demo")).status_code == 200


def _post_hooks(settings: dict) -> None:
    verify = ssl.create_default_context(cafile=settings["CHAT_WEBHOOK_CA_FILE"])
    with httpx.Client(verify=verify, timeout=5) as client:
        assert client.post(settings["DISCORD_WEBHOOK_URL"], json={"content": "demo"}).status_code == 204
        assert client.post(settings["TEAMS_WORKFLOW_URL"], json=CARD).status_code == 202


@pytest.mark.parametrize(("module", "post", "printed"), [
    ("tests.support.slack_server", _post_slack, "posted to C0DEMO0001: 'demo'"),
    ("tests.support.line_server", _post_line, f"200 push to …{USER[-6:]}: 'demo'"),
    ("tests.support.chat_webhooks_server", _post_hooks, "202 teams default: 'card accepted'"),
])  # fmt: skip
def test_stand_ins_serve_on_their_own_until_sigterm_and_keep_their_settings(tmp_path, module, post, printed):
    proc, settings = _serve(module, tmp_path)
    try:
        post(settings)
    finally:
        output = _stop(proc)
    assert printed in output
    proc, again = _serve(module, tmp_path)
    try:
        # The same secrets and webhooks after a restart (ports aside), so the app's settings stay valid.
        assert _portless(again) == _portless(settings)
        post(again)
    finally:
        _stop(proc)
