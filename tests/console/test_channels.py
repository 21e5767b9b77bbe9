"""Console → Channels: the kill switches, for operators only, with a reason, audited, CSRF-checked."""

from __future__ import annotations

import sqlalchemy as sa

from app.delivery import switches
from app.extensions import db
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.html import one, parse


def test_the_page_lists_each_sending_channel_with_its_providers(client, operator):
    html = client.get("/console/channels").get_data(as_text=True)

    page = parse(html)
    assert [s["id"] for s in page.select("section.channel-switch")] == [
        "channel-email",
        "channel-push",
        "channel-sms",
        "channel-chat",
        "channel-webhook",
    ]
    assert one(page, "#channel-email header .tag--success").get_text(strip=True) == "Running"
    assert "smtp" in one(page, "#channel-email table").get_text()


def test_pausing_needs_a_reason_and_is_audited_and_resuming_too(app, client, csrf, operator, audit_rows):
    refused = client.post("/console/channels/pause", headers=csrf(), data={"channel": "email", "reason": " "})
    assert refused.status_code == 302 and switches.read().switches == ()

    paused = client.post("/console/channels/pause", headers=csrf(), data={"channel": "email", "reason": "relay move"},
                         follow_redirects=True)  # fmt: skip
    html = paused.get_data(as_text=True)
    assert "email paused" in html and "Paused since" in html and "relay move" in html
    assert one(parse(html), "#channel-email header .tag--danger").get_text(strip=True) == "Paused"

    client.post("/console/channels/resume", headers=csrf(), data={"channel": "email"})
    assert switches.read().switches == ()
    assert [(r.action, r.target_id) for r in audit_rows()] == [("channel.pause", "email"), ("channel.resume", "email")]


def test_one_provider_can_be_paused_alone(client, csrf, operator):
    client.post("/console/channels/pause", headers=csrf(), data={"channel": "email", "provider": "smtp", "reason": "x"})

    [switch] = switches.read().switches
    assert (switch.channel, switch.provider) == ("email", "smtp")
    html = client.get("/console/channels").get_data(as_text=True)
    assert (
        one(parse(html), "#channel-email header .tag--success").get_text(strip=True) == "Running"
    )  # the channel itself


def test_members_get_no_page_and_no_switch(client, csrf, member):
    assert client.get("/console/channels").status_code in (302, 403)
    client.post("/console/channels/pause", headers=csrf(), data={"channel": "email", "reason": "mischief"})
    assert switches.read().switches == ()


def test_a_pause_without_the_csrf_token_changes_nothing(client, operator):
    response = client.post("/console/channels/pause", data={"channel": "email", "reason": "no token"})
    assert response.status_code == 400 and switches.read().switches == ()


def test_the_delivery_log_shows_the_chosen_channel_and_why_the_earlier_one_was_passed_over(client, operator):
    NotificationTypeFactory(type="reply")
    notification = NotificationFactory(user_id=UserFactory().id, type="reply")
    push = DeliveryFactory(notification_id=notification.id, channel="push", route_rank=0, status="standby")
    email = DeliveryFactory(notification_id=notification.id, channel="email", route_rank=1, status="standby")
    # What the engine's hand-over leaves: push passed over for want of a subscription, e-mail sent.
    db.session.execute(sa.text("UPDATE notification_deliveries SET status = 'pending' WHERE id = :id"), {"id": push.id})
    db.session.execute(sa.text("UPDATE notification_deliveries SET status = 'skipped', skip_reason = 'no_subscription'"
                               " WHERE id = :id"), {"id": push.id})  # fmt: skip
    db.session.execute(sa.text("UPDATE notification_deliveries SET status = 'sent', sent_at = now() WHERE id = :id"),
                       {"id": email.id})  # fmt: skip

    html = client.get(f"/console/deliveries/{email.id}").get_data(as_text=True)

    steps = [li.get_text(" ", strip=True) for li in parse(html).select("#chain li")]
    assert steps[0].startswith("Push") and "passed over" in steps[0] and "no_subscription" in steps[0]
    assert steps[1].startswith("E-mail") and "chosen" in steps[1]
    log = client.get("/console/deliveries").get_data(as_text=True)
    assert "no_subscription" in log


def test_the_dashboard_says_what_is_paused(app, client, operator):
    switches.pause(None, "email", "", "relay move", app.config)
    db.session.commit()

    html = client.get("/console/dashboard/live").get_data(as_text=True)

    assert "E-mail is paused: relay move" in one(parse(html), "#paused-channels").get_text(" ", strip=True)
    assert "Paused" in one(parse(html), "#providers").get_text()
