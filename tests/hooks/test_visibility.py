"""Provider events show in the delivery log's timeline and on GET /v1/notifications/<id>."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from tests.api.conftest import Api, send_body
from tests.factories import NotificationTypeFactory, UserFactory
from tests.hooks.conftest import mailgun_body, postmark_body
from tests.support.html import parse, texts


def test_the_timeline_shows_the_tries_then_what_the_provider_reported(client, login_as, mailgun, postmark, sent):
    delivery = sent()
    db.session.execute(
        sa.text(
            "INSERT INTO delivery_attempts (delivery_id, user_id, provider, started_at, duration_ms, outcome) "
            "VALUES (:id, :user_id, 'smtp', now() - interval '1 minute', 42, 'sent')"
        ),
        {"id": delivery.id, "user_id": delivery.user_id},
    )
    body = mailgun_body(delivery.provider_message_id, event="failed", severity="permanent", reason="bounce")
    assert client.post("/hooks/providers/mailgun", data=body, content_type="application/json").status_code == 200
    login_as(UserFactory(role="operator"))

    page = parse(client.get(f"/console/deliveries/{delivery.id}").get_data(as_text=True))

    timeline = [(texts(item, ".tag"), texts(item, ".ops-timeline__head")[0]) for item in page.select("#attempts > li")]
    assert [tags for tags, _ in timeline] == [["sent"], ["bounced"]]
    assert timeline[0][1].endswith("smtp · 42 ms")
    assert timeline[1][1].endswith("reported by mailgun")
    assert "alice@example.com" in texts(page.select("#attempts > li")[1], ".ops-timeline__error")[0]
    assert texts(page, "#provider-status")[0].startswith("bounced")


def test_the_api_shows_each_deliverys_provider_events(client, app, postmark, alice):
    from app.api_keys.scopes import SCOPES
    from app.api_keys.service import create_api_key

    NotificationTypeFactory(type="comment", default_email=True, priority="default")
    api = Api(client, create_api_key(None, "tests", SCOPES))
    created = api.post("/v1/notifications", send_body(alice.external_id)).get_json()["results"][0]
    db.session.execute(
        sa.text(
            "UPDATE notification_deliveries SET status = 'sent', provider = 'smtp', "
            "provider_message_id = '<delivery-' || id || '@hato.example>' WHERE notification_id = :n"
        ),
        {"n": created["notification_id"]},
    )
    message_id = db.session.execute(
        sa.text("SELECT provider_message_id FROM notification_deliveries WHERE notification_id = :n"),
        {"n": created["notification_id"]},
    ).scalar_one()
    for kind in ("Delivery", "Open"):
        response = client.post("/hooks/providers/postmark", data=postmark_body(message_id, kind), headers=postmark)
        assert response.status_code == 200

    shown = api.get(f"/v1/notifications/{created['notification_id']}").get_json()

    (delivery,) = shown["deliveries"]
    assert (delivery["status"], delivery["provider_status"]) == ("sent", "delivered")
    assert [(e["provider"], e["event"]) for e in delivery["provider_events"]] == [
        ("postmark", "delivered"),
        ("postmark", "opened"),
    ]
    assert delivery["provider_events"][0]["detail"]["recipient"] == "alice@example.com"
    assert delivery["provider_events"][0]["occurred_at"].startswith("2026-11-30T16:33:54")
    spec = api.get("/v1/openapi.json").get_json()
    schema = spec["components"]["schemas"]
    assert "provider_events" in schema["DeliveryOut"]["properties"]
    assert "ProviderEventOut" in schema
