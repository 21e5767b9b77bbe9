"""An action button in the inbox, end to end (issue 33): the product's receiver gets the webhook exactly once, and
the row shows the state the product answers with (PATCH /v1/notifications/<id>/actions/<name>)."""

from __future__ import annotations

import json
import urllib.request

import pytest
from playwright.sync_api import expect

from app.extensions import db
from tests.e2e.helpers import sign_in
from tests.factories import NotificationTypeFactory, UserFactory
from tests.realtime.helpers import api_notify, create_api_key
from tests.webhooks.helpers import drain, register
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.e2e


@pytest.fixture
def receiver(live_server, monkeypatch):
    """The product's webhook receiver, registered for notification.action (http on 127.0.0.1 allowed)."""
    for name in ("WEBHOOK_ALLOW_HTTP_ENDPOINTS", "WEBHOOK_ALLOW_PRIVATE_ADDRESSES"):
        monkeypatch.setitem(live_server.config, name, True)
    r = Receiver().start()
    with live_server.app_context():
        register(r, ["notification.action"])
        db.session.remove()
    yield r
    r.stop()


def _answer(base_url: str, key: str, notification_id: int, state: str) -> None:
    request = urllib.request.Request(
        f"{base_url}/v1/notifications/{notification_id}/actions/approve",
        data=json.dumps({"state": state}).encode(),
        method="PATCH",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def test_an_action_button_reaches_the_product_once_and_shows_its_answer(page, live_server, receiver):
    with live_server.app_context():
        NotificationTypeFactory(type="comment", label="Comment")
        user = UserFactory()
        db.session.commit()
        email, external_id = user.email, user.external_id
        db.session.remove()
    key = create_api_key(live_server)
    actions = [{"label": "Approve", "action": "approve"}, {"label": "View request", "url": "/requests/7"}]
    sent = api_notify(live_server.base_url, key, external_id, "Leave request from Ann", actions=actions)
    notification_id = sent["results"][0]["notification_id"]

    sign_in(page, email)
    row = page.locator(f"#notification-{notification_id}")
    expect(row.get_by_role("link", name="View request")).to_have_attribute("href", "/requests/7")
    row.get_by_role("button", name="Approve: Leave request from Ann").click()
    expect(row.locator('[data-action-state="approve"]')).to_contain_text("Sent")
    expect(row).not_to_have_class("item--unread")  # the click read it
    expect(page.locator("#inbox-status")).to_contain_text("Sent “Approve”.")

    with live_server.app_context():
        drain()
        db.session.remove()
    assert sum(receiver.wire.values()) == 1
    (event,) = receiver.store.values()
    assert event["data"]["action"]["name"] == "approve" and event["data"]["notification"]["id"] == notification_id

    _answer(live_server.base_url, key, notification_id, "Approved")
    expect(row.locator('[data-action-state="approve"]')).to_contain_text("Approved", timeout=6000)  # it asks every 2 s
    with live_server.app_context():
        drain()  # nothing more to send
        db.session.remove()
    assert sum(receiver.wire.values()) == 1
