"""A scheduled announcement reaches inboxes and fires its broadcast badge event without anyone clicking."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
import redis as redis_lib
import sqlalchemy as sa

from app.announcements import service
from app.announcements.live import announce_due, watermark_key
from app.extensions import db, redis
from app.inbox.queries import active_announcements, badge_count
from app.live.publish import broadcast_channel
from app.sweeper import sweep_once
from app.unitofwork import commit
from tests.factories import UserFactory
from tests.support.waiting import wait_for

pytestmark = pytest.mark.committed


@pytest.fixture
def listener(redis_url):
    """A real subscriber on the broadcast channel; returns a function that drains what arrived."""
    client = redis_lib.Redis.from_url(redis_url)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(broadcast_channel())
    pubsub.get_message(timeout=1)  # the subscribe confirmation

    def drain(wait: float = 0.3) -> list[dict]:
        messages, deadline = [], time.monotonic() + wait
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=0.05)
            if message:
                messages.append(json.loads(message["data"]))
        return messages

    yield drain
    pubsub.close()
    client.close()


def _schedule(app, seconds: float) -> tuple[int, object]:
    with app.app_context():
        redis.client().delete(watermark_key())
        member = UserFactory()
        operator = UserFactory(role="operator")
        at = db.session.execute(sa.select(sa.func.clock_timestamp())).scalar_one() + timedelta(seconds=seconds)
        assert service.create_announcement(operator, title="Starts soon", body="Hello", published_at=at) is False
        commit()
        member_id = member.id
        db.session.remove()
    return member_id, at


def test_scheduled_announcement_publishes_itself(app, listener):
    member_id, at = _schedule(app, 60)
    with app.app_context():
        assert announce_due(now=at - timedelta(milliseconds=1)) == {"announced": False}
        assert badge_count(member_id) == 0
        db.session.remove()
    assert listener() == []

    with app.app_context():
        assert announce_due(now=at + timedelta(milliseconds=1)) == {"announced": True}
        # Nothing new since the last run: no second event.
        assert announce_due(now=at + timedelta(seconds=1)) == {"announced": False}
        db.session.remove()
    assert listener() == [{"kind": "badge"}]


def test_the_inbox_shows_it_from_its_time_on(app):
    member_id, at = _schedule(app, 0.3)
    with app.app_context():
        assert badge_count(member_id) == 0
        db.session.remove()

        def visible() -> bool:
            db.session.remove()  # a new transaction: now() moves on
            return [a["title"] for a in active_announcements(member_id)] == ["Starts soon"]

        wait_for(visible, 10, "the announcement to go live")
        assert badge_count(member_id) == 1
        db.session.remove()


def test_the_sweeper_runs_it(app, listener):
    _schedule(app, 0.3)
    heard = []

    def swept_and_heard() -> bool:
        with app.app_context():
            sweep_once()
            db.session.remove()
        heard.extend(listener(wait=0.1))
        return {"kind": "badge"} in heard

    wait_for(swept_and_heard, 10, "the sweeper to announce it")


def test_an_expiry_moves_badges_too(app, listener):
    with app.app_context():
        operator = UserFactory(role="operator")
        now = db.session.execute(sa.select(sa.func.clock_timestamp())).scalar_one()
        service.create_announcement(operator, title="Short", body="b", expires_at=now + timedelta(seconds=30))
        commit()
        redis.client().set(watermark_key(), (now + timedelta(seconds=1)).isoformat())
        assert announce_due(now=now + timedelta(seconds=20)) == {"announced": False}
        assert announce_due(now=now + timedelta(seconds=31)) == {"announced": True}
        db.session.remove()
    assert {"kind": "badge"} in listener()


def test_a_redis_outage_keeps_the_watermark_for_the_next_run(app, monkeypatch):
    _, at = _schedule(app, 60)
    monkeypatch.setattr("app.announcements.live.publish_broadcast", lambda: False)
    with app.app_context():
        assert announce_due(now=at + timedelta(seconds=1)) == {"announced": False, "redis": "down"}
        assert redis.client().get(watermark_key()) is None
        monkeypatch.setattr("app.announcements.live.publish_broadcast", lambda: True)
        assert announce_due(now=at + timedelta(seconds=2)) == {"announced": True}
        db.session.remove()
