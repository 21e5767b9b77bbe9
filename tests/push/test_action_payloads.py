"""Action buttons (issue 33) in what pushes and e-mails carry: Web Push `actions`, aps.category, FCM click_action."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from app.actions import signing
from app.delivery import rendering
from app.delivery.channels import channel_for
from app.delivery.queries import BatchRow
from app.providers.apns_payload import apns_payload
from app.providers.fcm import fcm_message
from app.providers.mobile import DeviceTarget

ACTIONS = [{"label": "Approve", "labels": {"ja": "承認"}, "action": "approve"}, {"label": "View", "url": "/orders/42"}]
IOS = DeviceTarget(1, "ios", "a" * 64, "com.example.app", "ja")
ANDROID = DeviceTarget(2, "android", "token-2", "com.example.app", "ja")


def _row(actions=ACTIONS, **fields) -> BatchRow:
    values = dict(id=9, channel="push", attempts=0, locked_until=datetime.now(UTC), notification_id=41, type="comment",
                  title="Leave request", body="Ann asks for Friday off", link_path="/requests/7", data={}, user_id=5,
                  email="m@example.com", display_name="M", locale="ja", timezone="UTC", quiet_hours_start=None,
                  quiet_hours_end=None, type_label="Comment", priority="high", mandatory=False, allowed=True,
                  suppressed=False, actions=actions)  # fmt: skip
    return BatchRow(**{**values, **fields})


@pytest.fixture
def message(app):
    with app.test_request_context():
        config = {**app.config, "BASE_URL": "https://hato.example"}
        return channel_for("push").build_message(_row(), {}, config, (IOS, ANDROID))


def test_web_push_carries_the_buttons_in_the_members_locale(app, message):
    buttons = json.loads(message.text)["actions"]
    assert [(b["action"], b["title"]) for b in buttons] == [("approve", "承認"), ("link-2", "View")]
    assert buttons[1] == {"action": "link-2", "title": "View", "url": "https://hato.example/orders/42"}
    assert buttons[0]["post"] is True and buttons[0]["url"].startswith("https://hato.example/actions/")
    with app.test_request_context():
        token = buttons[0]["url"].rsplit("/", 1)[1]
        assert signing.read_token(token) == signing.ActionTarget(5, 41, "approve")


def test_apns_names_the_category_and_fcm_the_click_action(message):
    mobile = message.mobile
    body = json.loads(apns_payload(mobile, mobile.alert_for("ja")))
    assert body["aps"]["category"] == "HATO_ACTIONS_2"
    assert [b["action"] for b in body["actions"]] == ["approve", "link-2"]
    fcm = fcm_message(ANDROID, mobile, mobile.alert_for("ja"))["message"]
    assert fcm["android"]["notification"] == {"click_action": "HATO_NOTIFICATION_ACTIONS"}
    assert [b["title"] for b in json.loads(fcm["data"]["actions"])] == ["承認", "View"]


def test_no_buttons_leave_the_payloads_as_they_were(app):
    with app.test_request_context():
        config = {**app.config, "BASE_URL": "https://hato.example"}
        message = channel_for("push").build_message(_row(actions=None), {}, config, (IOS, ANDROID))
    assert "actions" not in json.loads(message.text)
    body = json.loads(apns_payload(message.mobile, message.mobile.alert_for("ja")))
    assert "category" not in body["aps"] and "actions" not in body
    fcm = fcm_message(ANDROID, message.mobile, message.mobile.alert_for("ja"))["message"]
    assert "notification" not in fcm["android"] and "actions" not in fcm["data"]


def test_the_email_links_each_button(app):
    with app.test_request_context():
        rendered = rendering.render_email(_row(channel="email", locale="en"), None, "https://hato.example", "https://u")
    assert "Approve: https://hato.example/actions/" in rendered.text
    assert "View: https://hato.example/orders/42" in rendered.text
    assert '<a class="button" href="https://hato.example/orders/42">View</a>' in rendered.html
