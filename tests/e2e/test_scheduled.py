"""A scheduled notification in a real browser, with a real sweeper process releasing it.

POST /v1/notifications with send_at a few seconds ahead: until then the open inbox shows nothing new;
at send_at the sweeper releases it and the page's badge and toast follow live, without a reload.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.extensions import db
from tests.e2e.helpers import sign_in
from tests.factories import NotificationTypeFactory, UserFactory
from tests.realtime.helpers import api_notify, create_api_key

pytestmark = pytest.mark.e2e

LEAD_SECONDS = 4


@pytest.fixture
def sweeper(processes):
    """A real sweeper process releasing scheduled rows every 0.2 s."""
    return processes("sweep", SCHEDULER_INTERVAL_SECONDS=0.2)


@pytest.fixture
def member(live_server):
    """A member with one unread notification; returns (e-mail, external id)."""
    with live_server.app_context():
        NotificationTypeFactory(type="comment", label="Comment")
        user = UserFactory()
        db.session.execute(
            sa.text(
                "INSERT INTO notifications (user_id, type, title, body, dedupe_key) "
                "VALUES (:u, 'comment', 'Earlier news', 'Body', 'e2e-earlier')"
            ),
            {"u": user.id},
        )
        db.session.commit()
        member = (user.email, user.external_id)
        db.session.remove()
    return member


def open_inbox(page, email: str, seconds: float = 15) -> None:
    """Sign in and wait until the websocket has delivered its first (authoritative) count."""
    frames: list = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(payload)))
    sign_in(page, email)
    deadline = time.monotonic() + seconds
    while not frames:
        assert time.monotonic() < deadline, "no websocket frame arrived"
        page.wait_for_timeout(50)
    page.evaluate("window.__sameDocument = true")


def test_a_scheduled_notification_appears_live_at_send_at(page, live_server, member, sweeper):
    email, external_id = member
    key = create_api_key(live_server)
    open_inbox(page, email)
    badge = page.locator("#inbox-badge")
    expect(badge).to_have_text("1")

    send_at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=LEAD_SECONDS)
    answer = api_notify(live_server.base_url, key, external_id, "Your report is ready", send_at=send_at.isoformat())
    assert answer["status"] == "scheduled" and answer["scheduled"] == 1

    # Before send_at: nothing in the badge, no toast, no row (the sweeper runs all the while).
    page.wait_for_timeout((LEAD_SECONDS - 1.5) * 1000)
    expect(badge).to_have_text("1")
    expect(page.locator("#toasts [data-toast]")).to_have_count(0)
    with live_server.app_context():
        assert db.session.execute(sa.text("SELECT count(*) FROM notifications")).scalar_one() == 1
        db.session.remove()

    # At send_at, live: the badge moves and the toast names it. Never early; how late is printed, not asserted
    # (within about a second on a quiet machine, bench_scheduler measures it; a full suite on 2 CPUs took over 5 s).
    expect(badge).to_have_text("2", timeout=(1.5 + 30) * 1000)
    appeared = datetime.now(UTC)
    expect(page.locator("#toasts [data-toast]")).to_contain_text("Your report is ready")
    print(f"appeared {(appeared - send_at).total_seconds():.2f} s after send_at")
    assert appeared >= send_at - timedelta(milliseconds=50)
    assert page.evaluate("window.__sameDocument") is True  # no reload

    # The row is the inbox's newest, unread (the list renders it on its next load).
    page.reload()
    first = page.locator("#notification-list li.item").first
    expect(first).to_contain_text("Your report is ready")
    expect(first).to_have_class(re.compile(r"item--unread"))
