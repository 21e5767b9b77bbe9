"""Campaign fixtures: an operator, a campaign type, users in bulk, clean Redis, recorded badge events."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from rq.job import Job
from rq.serializers import JSONSerializer

from app.campaigns import service
from app.extensions import db, redis
from app.queueing import fanout_job
from app.unitofwork import commit
from tests.factories import NotificationTypeFactory, UserFactory


@pytest.fixture
def operator():
    """An operator (the actor of service calls; also a user, so "everyone" includes her)."""
    return UserFactory(role="operator", email="olga@example.com", locale="de")


@pytest.fixture
def promo():
    """A campaign type: inbox and e-mail on by default, push off."""
    return NotificationTypeFactory(
        type="promo", label="Offers", default_in_app=True, default_email=True, default_push=False, priority="default"
    )


@pytest.fixture
def make_users():
    """Insert n users set-based (prefix-<i> external ids and e-mails); return their ids in order."""

    def _make(n: int, prefix: str = "u", locale: str = "en") -> list[int]:
        rows = db.session.execute(
            sa.text(
                "INSERT INTO users (external_id, email, display_name, locale) "
                "SELECT :p || '-' || g, :p || '-' || g || '@example.com', 'User ' || g, :locale "
                "FROM generate_series(1, :n) g ORDER BY g RETURNING id"
            ),
            {"p": prefix, "n": n, "locale": locale},
        )
        return [row.id for row in rows]

    return _make


@pytest.fixture
def launch(operator, promo):
    """Create a campaign as a draft and send it now; return its id. The test runs the fanout itself,
    so the fanout job that followed the commit is taken back off the queue."""

    def _launch(**fields) -> int:
        values = dict(name="Spring offer", type_=promo.type, title="Spring is here", body="20 % off")
        values.update(fields)
        campaign = service.create_campaign(operator, **values)
        service.send_campaign(operator, campaign.id)
        assert commit().wait().get("jobs") == 1
        Job.fetch(fanout_job(campaign.id).job_id, connection=redis.client(), serializer=JSONSerializer).delete()
        return campaign.id

    return _launch


@pytest.fixture
def badges(monkeypatch):
    """Record the badge events the fanout job routes (user ids per call)."""
    calls: list[list[int]] = []
    monkeypatch.setattr("app.live.publish.route_badge", lambda ids, *rest: calls.append(sorted(ids)) or set(ids))
    return calls


def counts() -> dict[str, int]:
    """Rows the campaign machinery wrote, by table (read fresh)."""
    return {
        "notifications": db.session.execute(sa.text("SELECT count(*) FROM notifications")).scalar_one(),
        "deliveries": db.session.execute(sa.text("SELECT count(*) FROM notification_deliveries")).scalar_one(),
    }
