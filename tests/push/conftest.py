"""Push fixtures: a local push service, VAPID keys in the app config, subscribed users."""
from __future__ import annotations

import pytest

from app.extensions import db
from app.models import PushSubscription
from app.push.cli import generate_keys
from tests.push.pushserver import PushServer

KEYS = generate_keys()


@pytest.fixture
def push_service():
    """A Web Push service on 127.0.0.1 that verifies VAPID and decrypts what it gets."""
    with PushServer() as service:
        yield service


@pytest.fixture
def vapid(app, monkeypatch):
    """VAPID keys configured and the webpush provider on for this test; returns (public, private)."""
    monkeypatch.setitem(app.config, "VAPID_PUBLIC_KEY", KEYS[0])
    monkeypatch.setitem(app.config, "VAPID_PRIVATE_KEY", KEYS[1])
    monkeypatch.setitem(app.config, "VAPID_SUBJECT", "mailto:ops@hato.test")
    monkeypatch.setitem(app.config, "PUSH_PROVIDER", "webpush")
    monkeypatch.setitem(app.config, "PUSH_TIMEOUT", 5)
    return KEYS


def add_subscription(user, subscription: dict) -> PushSubscription:
    """Store a browser subscription for user (as POST /push/subscriptions would)."""
    row = PushSubscription(user_id=user.id, endpoint=subscription["endpoint"], p256dh=subscription["keys"]["p256dh"],
                           auth=subscription["keys"]["auth"])
    db.session.add(row)
    db.session.flush()
    return row
