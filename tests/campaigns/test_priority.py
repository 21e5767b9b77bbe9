"""Priority: an interactive notification sent during a big campaign goes out before the campaign's tail.

A real RQ worker process listens on high, default and low (in that order) and sends through SMTP to an
aiosmtpd sink; the campaign's deliveries are on `low`, the interactive one on its type's `high` queue.
Bounded: 2,000 recipients, 120 s at most.
"""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa

from app.campaigns import service
from app.extensions import db, redis
from app.notify.service import notify
from app.unitofwork import commit
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support import processes
from tests.support.smtp import SmtpSink
from tests.support.waiting import free_port, wait_for

pytestmark = pytest.mark.committed

RECIPIENTS = 2000
DEADLINE_SECONDS = 120


@pytest.fixture
def stack(app, tmp_path):
    """An SMTP sink in this process and a worker process over high, default, low."""
    sink = SmtpSink(free_port()).start()
    with app.app_context():
        redis.client().flushdb()
    env = dict(
        os.environ,
        SMTP_URL=sink.url,
        EMAIL_PROVIDER="smtp",
        DELIVERY_BATCH_SIZE="100",
        FANOUT_BATCH_SIZE="1000",
        PYTHONUNBUFFERED="1",
    )
    worker = processes.spawn(processes.flask_args("worker", "high", "default", "low"), env, tmp_path / "worker.log")
    yield sink
    processes.stop(worker)
    sink.stop()
    with app.app_context():
        redis.client().flushdb()


def test_an_interactive_notification_overtakes_the_campaign_tail(app, stack):
    sink = stack
    with app.app_context():
        NotificationTypeFactory(type="promo", default_email=True, priority="default")
        NotificationTypeFactory(type="otp", default_email=True, priority="high")
        operator = UserFactory(role="operator", email="ops@example.com")
        db.session.execute(
            sa.text(
                "INSERT INTO users (external_id, email) SELECT 'c-' || g, 'c-' || g || '@example.com' "
                "FROM generate_series(1, :n) g"
            ),
            {"n": RECIPIENTS - 1},
        )
        campaign = service.create_campaign(operator, name="Big", type_="promo", title="Sale", body="Everything")
        service.send_campaign(operator, campaign.id)
        assert commit().wait().get("jobs") == 1  # the fanout job followed the commit
        campaign_id = campaign.id

        # The campaign is under way: its first messages are arriving.
        wait_for(lambda: len(sink.messages) >= 200, DEADLINE_SECONDS, "the campaign to start sending", interval=0.05)
        result = notify(["c-7"], type_="otp", title="Your code", body="123456", dedupe_key="otp:1")
        assert commit().wait().get("enqueued") == 1  # on the type's queue, `high`
        (otp_id,) = result.pending["email"]
        assert result.priority == "high"

        wait_for(lambda: len(sink.messages) >= RECIPIENTS + 1, DEADLINE_SECONDS, "every message", interval=0.05)
        db.session.remove()
        timing = db.session.execute(
            sa.text(
                """SELECT (SELECT sent_at FROM notification_deliveries WHERE id = :otp) AS otp_sent,
                      max(d.sent_at) AS tail_sent,
                      count(*) FILTER (WHERE d.sent_at > (SELECT sent_at FROM notification_deliveries WHERE id = :otp))
                        AS sent_after,
                      count(*) FILTER (WHERE d.status = 'sent') AS sent
               FROM notification_deliveries d JOIN notifications n ON n.id = d.notification_id
               WHERE n.campaign_id = :campaign"""
            ),
            {"otp": otp_id, "campaign": campaign_id},
        ).one()

    assert timing.sent == RECIPIENTS
    assert timing.otp_sent < timing.tail_sent
    # It waited for at most the batch in progress, not for the campaign's queue.
    assert timing.sent_after >= RECIPIENTS // 2, timing
    arrivals = [m.message["Message-ID"] for m in sink.messages]
    assert arrivals.count(f"<delivery-{otp_id}@hato.127.0.0.1>") == 1
    assert len(set(arrivals)) == RECIPIENTS + 1
