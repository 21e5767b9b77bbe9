"""Redis down at ingest time: the request still succeeds; the committed pending rows are the truth."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app import create_app, live, queueing, unitofwork
from app.api_keys.service import create_api_key
from app.extensions import db, limiter
from tests.conftest import TEST_CONFIG
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.waiting import free_port


@pytest.fixture
def redisless_app(app):
    """An app whose Redis for queues and pub/sub is a closed port.

    The rate-limit storage stays on the test Redis: Flask-Limiter's own fallback is not under test,
    and the limiter is one shared object whose storage state would outlive this app.
    """
    dead = f"redis://127.0.0.1:{free_port()}/0"
    yield create_app(dict(TEST_CONFIG, REDIS_URL=dead, REALTIME_REDIS_URL=dead,
                          RATELIMIT_STORAGE_URI=app.config["RATELIMIT_STORAGE_URI"]))  # fmt: skip
    # The limiter is one shared extension object: give it back the test app's storage.
    limiter.init_app(app)


@pytest.mark.committed
def test_ingest_succeeds_and_leaves_pending_rows_when_redis_is_down(redisless_app, monkeypatch):
    outcomes = []
    for module, name in ((queueing, "coalesce_deliveries"), (live.publish, "route_badge")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, **k: outcomes.append(_real(*a, **k)))
    with redisless_app.app_context():
        NotificationTypeFactory(type="comment", default_email=True)
        UserFactory(external_id="offline-1")
        key = create_api_key(None, "redis-down")
        db.session.commit()
    client = redisless_app.test_client()
    response = client.post(
        "/v1/notifications",
        headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "k1"},
        json={"type": "comment", "recipient": "offline-1", "title": "Still delivered later"},
    )
    assert response.status_code == 202
    assert response.get_json()["created"] == 1
    assert unitofwork.wait_idle(redisless_app, timeout=30)
    with redisless_app.app_context():
        rows = db.session.execute(sa.text("SELECT channel, status FROM notification_deliveries")).all()
        completed = db.session.execute(
            sa.text("SELECT count(*) FROM idempotency_keys WHERE completed_at IS NOT NULL")
        ).scalar_one()
        db.session.remove()
    assert rows == [("email", "pending")] and completed == 1
    assert outcomes == [False, None]  # enqueue and publish both failed, and the request did not
