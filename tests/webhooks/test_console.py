"""Console → Webhooks (admins only): register (secret shown once), attempts, test event, replay, edit, delete."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from standardwebhooks.webhooks import Webhook

from app.extensions import db
from app.webhooks import service
from tests.factories import UserFactory
from tests.support.html import one, texts
from tests.webhooks.helpers import drain, rows

pytestmark = pytest.mark.committed  # the test event goes through the engine's own connection


@pytest.fixture
def admin(login_as):
    return login_as(UserFactory(role="admin"))


def test_register_shows_the_secret_once_then_attempts_test_and_replay(client, csrf, admin, local_webhooks, receiver):
    response = client.post(
        "/console/webhooks",
        headers=csrf(),
        data={"url": receiver.url, "description": "billing", "event_types": ["notification.read"], "enabled": "on"},
    )
    assert response.status_code == 201
    secret = one(response.get_data(as_text=True), "code#new-secret").get_text()
    receiver.secret = secret
    [endpoint] = db.session.execute(sa.text("SELECT * FROM webhook_endpoints")).all()
    assert secret not in endpoint.secret_sealed and endpoint.secret_hint == secret[-4:]
    listing = client.get("/console/webhooks").get_data(as_text=True)
    assert secret not in listing and receiver.url in listing
    audit = db.session.execute(sa.text("SELECT action FROM audit_log")).scalars().all()
    assert "webhook.create" in audit

    flashed = client.post(f"/console/webhooks/{endpoint.id}/test", headers=csrf(), follow_redirects=True)
    assert "Test event queued" in flashed.get_data(as_text=True)
    drain()
    assert receiver.types() == {"webhook.test": 1}
    receiver.answer = 400
    service.emit("notification.read", {"user_id": 1, "notification_id": 1})
    db.session.commit()
    drain()
    page = client.get(f"/console/webhooks/{endpoint.id}").get_data(as_text=True)
    cells = texts(page, ".console-webhook-attempts tbody tr td")
    assert "webhook.test" in cells and "400" in cells and "200" in cells
    only_rejected = client.get(f"/console/webhooks/{endpoint.id}?outcome=permanent").get_data(as_text=True)
    assert "webhook.test" not in texts(only_rejected, ".console-webhook-attempts tbody tr td")

    receiver.answer = 200
    replayed = client.post(f"/console/webhooks/{endpoint.id}/replay", headers=csrf(), follow_redirects=True)
    assert "1 failed event queued again." in replayed.get_data(as_text=True)
    drain()
    assert receiver.types() == {"webhook.test": 1, "notification.read": 1}
    assert Webhook(secret)  # the shown secret is the one that verified every request (receiver.rejected)
    assert receiver.rejected == 0


def test_refusals_edit_and_delete(client, csrf, admin, local_webhooks, receiver, monkeypatch):
    monkeypatch.setitem(local_webhooks, "WEBHOOK_ALLOW_PRIVATE_ADDRESSES", False)
    refused = client.post(
        "/console/webhooks", headers=csrf(), data={"url": receiver.url, "event_types": ["notification.read"]}
    )
    assert refused.status_code == 422 and "loopback" in refused.get_data(as_text=True)
    monkeypatch.setitem(local_webhooks, "WEBHOOK_ALLOW_PRIVATE_ADDRESSES", True)
    none = client.post("/console/webhooks", headers=csrf(), data={"url": receiver.url})
    assert none.status_code == 422 and "at least one event type" in none.get_data(as_text=True)
    client.post("/console/webhooks", headers=csrf(), data={"url": receiver.url, "event_types": ["notification.read"]})
    endpoint_id = db.session.execute(sa.text("SELECT id FROM webhook_endpoints")).scalar_one()
    client.post(f"/console/webhooks/{endpoint_id}", headers=csrf(), data={"event_types": ["user.unsubscribed"]})
    row = db.session.execute(sa.text("SELECT event_types, enabled FROM webhook_endpoints")).one()
    assert (row.event_types, row.enabled) == (["user.unsubscribed"], False)
    disabled = client.post(f"/console/webhooks/{endpoint_id}/test", headers=csrf(), follow_redirects=True)
    assert "The endpoint is disabled" in disabled.get_data(as_text=True) and rows() == []
    client.post(f"/console/webhooks/{endpoint_id}/delete", headers=csrf())
    assert db.session.execute(sa.text("SELECT count(*) FROM webhook_endpoints")).scalar() == 0


def test_members_and_operators_cannot_see_webhooks(client, login_as):
    login_as(UserFactory(role="operator"))
    assert client.get("/console/webhooks").status_code == 403
