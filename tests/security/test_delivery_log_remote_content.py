"""Attack: HTML sent through the API carries a tracking pixel; an operator opening the delivery log pings it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from app.extensions import db
from tests.e2e.helpers import sign_in
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.listener import Listener

pytestmark = pytest.mark.e2e


@pytest.fixture
def tracker():
    """A host the operator's browser must never reach: any fetch, https or not, is a counted connection."""
    with Listener() as listener:
        yield listener


def _tracked_delivery(live_server, tracker_port: int) -> tuple[str, int]:
    body = (
        "<p style='color:#c00'>Your order shipped</p>"
        f"<img id='pixel' src='https://127.0.0.1:{tracker_port}/open.gif?op=1' width='1' height='1'>"
        f"<img src='http://127.0.0.1:{tracker_port}/open2.gif'>"
        f"<link rel='stylesheet' href='https://127.0.0.1:{tracker_port}/t.css'>"
        f"<div style=\"background:url('https://127.0.0.1:{tracker_port}/bg.png')\">x</div>"
        f"<style>@import url('https://127.0.0.1:{tracker_port}/i.css'); @font-face {{font-family: t; "
        f"src: url('https://127.0.0.1:{tracker_port}/f.woff')}} p {{font-family: t}}</style>"
    )
    with live_server.app_context():
        kind = NotificationTypeFactory(type="shipping", label="Shipping")
        member = UserFactory()
        operator = UserFactory(role="operator")
        note = NotificationFactory(user_id=member.id, type=kind.type, title="Shipped")
        row = DeliveryFactory(notification_id=note.id, channel="email", status="sent", provider="smtp",
                              rendered_subject="Shipped", rendered_body=body)  # fmt: skip
        db.session.commit()
        email, delivery_id = operator.email, row.id
        db.session.remove()
    return email, delivery_id


def test_opening_the_sent_html_fetches_nothing_from_elsewhere(page, live_server, tracker):
    operator, delivery_id = _tracked_delivery(live_server, tracker.port)
    sign_in(page, operator)
    response = page.goto(f"/console/deliveries/{delivery_id}")
    policy = response.headers["content-security-policy"]
    img_src = next(d for d in policy.split("; ") if d.startswith("img-src"))
    assert "https:" not in img_src and "*" not in img_src and "http:" not in img_src
    page.get_by_text("Show as HTML").click()
    frame = page.frame_locator("iframe.console-email-frame")
    expect(frame.locator("p")).to_have_text("Your order shipped")  # the content is shown, styled inline
    page.wait_for_timeout(1500)
    assert tracker.connections == 0
