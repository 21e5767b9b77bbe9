"""Campaigns and the DLQ in a real browser, with real worker (and sweeper) processes.

1. A campaign to 1,000 users: the progress bar fills to 100 % live while a worker fans it out.
2. The SMTP sink goes down: the campaign's e-mails fail into the DLQ; the sink comes back; "Replay all"
   sends every one of them exactly once (counted at the sink by Message-ID).
"""

from __future__ import annotations

from collections import Counter

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.campaigns import service
from app.extensions import db
from app.unitofwork import commit
from tests.e2e.helpers import sign_in
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.smtp import RecordingHandler, SmtpSink
from tests.support.waiting import free_port, wait_for

pytestmark = pytest.mark.e2e

USERS = 1000


@pytest.fixture
def console_errors(page):
    """Errors in the page (a CSP violation shows up here) and failed responses (the favicon aside)."""
    errors: list[str] = []
    page.on(
        "console",
        lambda m: (
            errors.append(m.text) if m.type == "error" and not m.text.startswith("Failed to load resource") else None
        ),
    )
    page.on(
        "response",
        lambda r: (
            errors.append(f"{r.status} {r.url}") if r.status >= 400 and not r.url.endswith("/favicon.ico") else None
        ),
    )
    page.on("dialog", lambda dialog: dialog.accept())  # the "Are you sure?" confirmations
    return errors


def _setup(live_server, *, email: bool, users: int) -> str:
    """Commit a campaign type, an operator and `users - 1` more users; return the operator's e-mail."""
    with live_server.app_context():
        NotificationTypeFactory(type="promo", label="Offers", default_email=email)
        operator = UserFactory(role="operator", email="ops@example.com")
        db.session.execute(
            sa.text(
                "INSERT INTO users (external_id, email) SELECT 'e2e-' || g, 'e2e-' || g || "
                "'@example.com' FROM generate_series(1, :n) g"
            ),
            {"n": users - 1},
        )
        db.session.commit()
        email = operator.email
        db.session.remove()
    return email


def _sign_in(page, email: str) -> None:
    sign_in(page, email)


def test_a_campaign_to_1000_users_fills_its_progress_bar(page, live_server, processes, console_errors):
    _sign_in(page, _setup(live_server, email=False, users=USERS))
    page.goto("/console/campaigns")
    page.get_by_role("link", name="New campaign").click()
    page.get_by_label("Name (for operators)").fill("Winter sale")
    page.get_by_label("Notification type").select_option("promo")
    page.get_by_label("Title").fill("Winter sale starts today")
    page.get_by_label("Body").fill("Everything 30 % off until Sunday.")
    page.get_by_role("button", name="Save draft and review").click()
    expect(page.locator("#campaign-audience-size")).to_have_text("1,000 users")

    page.get_by_role("button", name="Send or schedule").click()
    expect(page.locator(".alert--success")).to_contain_text("Sending")
    percent = page.locator(".ops-progress__percent")
    expect(percent).to_have_text("0 %")  # no worker yet: the bar waits...

    processes("worker", FANOUT_BATCH_SIZE=50)  # ...and fills while the page polls (20 batches)
    expect(percent).to_have_text("100 %", timeout=30_000)
    expect(page.locator(".ops-progress__count")).to_have_text("1,000 of 1,000 users")
    expect(page.locator("progress.ops-progress__bar")).to_have_attribute("value", "100")
    expect(page.locator("#results-in_app td").first).to_have_text("1,000")
    assert console_errors == []


def test_failed_emails_land_in_the_dlq_and_a_replay_sends_each_once(page, live_server, processes, console_errors):
    recipients = 25
    operator = _setup(live_server, email=True, users=recipients)
    port = free_port()
    handler = RecordingHandler()  # the sink is down: nothing listens on port yet
    # Two quick tries each, and a circuit breaker that stays closed: every e-mail fails for good fast.
    env = dict(
        SMTP_URL=f"smtp://127.0.0.1:{port}",
        EMAIL_PROVIDER="smtp",
        SMTP_TIMEOUT=2,
        RETRY_MAX_ATTEMPTS=2,
        RETRY_BASE_SECONDS=0.2,
        RETRY_CAP_SECONDS=0.5,
        SWEEP_INTERVAL_SECONDS=0.5,
        SWEEP_REQUEUE_AFTER_SECONDS=3,
        DELIVERY_BATCH_SIZE=10,
        BREAKER_FAILURES=1000,
    )
    processes("worker", **env)
    processes("sweep", **env)
    with live_server.app_context():
        campaign = service.create_campaign(None, name="Outage", type_="promo", title="Hello", body="News")
        service.send_campaign(None, campaign.id)
        assert commit().wait().get("jobs") == 1  # the fanout job follows the commit

        def failed() -> int:
            db.session.remove()
            return db.session.execute(
                sa.text("SELECT count(*) FROM notification_deliveries WHERE status = 'failed'")
            ).scalar_one()

        wait_for(lambda: failed() == recipients, 60, "every e-mail to fail into the DLQ")
        ids = sorted(db.session.execute(sa.text("SELECT id FROM notification_deliveries")).scalars())
        db.session.remove()

    _sign_in(page, operator)
    page.goto("/console/dlq")
    expect(page.locator("#dlq-matching")).to_have_text(str(recipients))
    expect(page.locator("#dlq-rows tbody tr")).to_have_count(recipients)
    expect(page.locator("#dlq-rows")).to_contain_text("refused")

    sink = SmtpSink(port, handler).start()  # the sink is back
    try:
        page.get_by_role("button", name=f"Replay all {recipients}").click()
        expect(page.locator(".alert--success")).to_contain_text(f"Replaying {recipients} failed deliveries")
        expect(page.locator(".ops-progress__percent").first).to_have_text("100 %", timeout=20_000)
        wait_for(lambda: len(handler.messages) >= recipients, 60, "the replayed e-mails")

        def all_sent() -> bool:
            with live_server.app_context():
                db.session.remove()
                statuses = db.session.execute(sa.text("SELECT DISTINCT status FROM notification_deliveries"))
                return set(statuses.scalars()) == {"sent"}

        # A row is recorded sent only after its send, and a sent row is never claimed again: once every
        # row says sent, the sink has everything it will ever get, duplicates included.
        wait_for(all_sent, 30, "every replayed row to be recorded sent")
        arrived = Counter(m.message["Message-ID"] for m in handler.messages)
    finally:
        sink.stop()

    assert arrived == Counter({f"<delivery-{i}@hato.127.0.0.1>": 1 for i in ids})
    page.goto("/console/dlq")
    expect(page.locator(".empty__title")).to_have_text("Nothing here.")
    page.goto("/console/dashboard")
    expect(page.locator("#stat-dlq")).to_have_text("0")
    with page.expect_response(lambda r: "/console/dashboard/live" in r.url, timeout=10_000):
        pass  # the figures refresh themselves
    expect(page.locator("svg.ops-chart__svg rect.ops-chart__bar--sent").first).to_be_visible()
    assert console_errors == []
