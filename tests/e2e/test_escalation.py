"""Per-type timing in a real browser, with a real worker, sweeper and SMTP sink.

1. Escalation cancelled: the notification is read in another tab before escalate_after → no e-mail.
2. Escalation honoured: still unread when escalate_after passes → exactly one e-mail, not before.
3. Online routing: with the inbox open (a live socket) no e-mail; once the socket is gone, an e-mail.
"""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.extensions import db, redis
from app.live import presence
from app.notify.service import notify
from app.realtime.hub import hub_for
from app.unitofwork import commit
from tests.e2e.helpers import sign_in, wait_for_htmx
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

ESCALATE_AFTER = 4


def _setup(live_server, **type_fields) -> tuple[int, str]:
    """Commit the type `mention` (e-mail on) and a user; return (user id, e-mail)."""
    with live_server.app_context():
        NotificationTypeFactory(type="mention", label="Mentions", default_email=True, **type_fields)
        user = UserFactory(email="reader@example.com", display_name="Reader")
        db.session.commit()
        found = (user.id, user.email)
        db.session.remove()
    return found


def _notify(live_server, title: str, key: str) -> None:
    """Send the reader a `mention` as the API would (the jobs and badge events follow the commit)."""
    with live_server.app_context():
        user_id = db.session.execute(sa.text("SELECT id FROM users WHERE email = 'reader@example.com'")).scalar_one()
        notify([user_id], by="user_id", type_="mention", title=title, body="You were mentioned.", dedupe_key=key)
        commit().wait()
        db.session.remove()


def _deliveries(live_server) -> list[tuple[str, str | None]]:
    with live_server.app_context():
        db.session.remove()
        rows = db.session.execute(sa.text("SELECT status, skip_reason FROM notification_deliveries ORDER BY id"))
        found = [tuple(row) for row in rows]
        db.session.remove()
    return found


def test_reading_in_another_tab_cancels_the_escalation(page, live_server, workers, sink):
    _, email = _setup(live_server, escalate_after=ESCALATE_AFTER)
    sign_in(page, email)
    _notify(live_server, "Ada mentioned you", "esc-read")
    expect(page.locator("#inbox-badge")).to_have_text("1", timeout=5000)  # tab one, live

    other = page.context.new_page()
    other.goto(live_server.base_url + "/inbox")
    wait_for_htmx(other)
    other.get_by_role("button", name="Mark read: Ada mentioned you").click()
    expect(other.locator("#inbox-badge")).not_to_have_text("1")
    expect(page.locator("#inbox-badge")).not_to_have_text("1", timeout=5000)
    assert _deliveries(live_server) == [("skipped", "read")]  # at once, in the delivery log

    time.sleep(ESCALATE_AFTER + 2)  # past the escalation, several sweeps later
    assert sink[1].messages == []
    assert _deliveries(live_server) == [("skipped", "read")]


def test_an_unread_notification_escalates_to_one_email(page, live_server, workers, sink):
    _, email = _setup(live_server, escalate_after=ESCALATE_AFTER)
    sign_in(page, email)
    created = time.monotonic()
    _notify(live_server, "Grace mentioned you", "esc-unread")
    expect(page.locator("#inbox-badge")).to_have_text("1", timeout=5000)

    time.sleep(1)
    assert sink[1].messages == [] and _deliveries(live_server) == [("pending", None)]  # waiting, not sent

    wait_for(lambda: len(sink[1].messages) >= 1, 30, "the escalation e-mail")
    assert time.monotonic() - created >= ESCALATE_AFTER - 0.5
    wait_for(lambda: _deliveries(live_server) == [("sent", None)], 10, "the delivery recorded sent")
    time.sleep(2)  # nothing more comes
    [message] = sink[1].messages
    assert message.rcpt_tos == [email] and message.message["Subject"] == "Grace mentioned you"


def test_online_routing_skips_email_while_the_socket_is_open(page, live_server, workers, sink):
    user_id, email = _setup(live_server, skip_when_online=True)
    sign_in(page, email)
    hub = hub_for(live_server)
    wait_for(lambda: user_id in hub.local_user_ids(), 10, "the inbox's socket")

    _notify(live_server, "While you are here", "online-1")
    expect(page.locator("#inbox-badge")).to_have_text("1", timeout=5000)
    wait_for(lambda: _deliveries(live_server) == [("skipped", "online")], 15, "the e-mail skipped as online")
    assert sink[1].messages == []

    page.close()  # the socket goes away...
    wait_for(lambda: user_id not in hub.local_user_ids(), 15, "the socket to close")
    # ...and its last heartbeat ages out after PRESENCE_TTL_SECONDS (60 s); age it now instead of waiting.
    with live_server.app_context():
        redis.client().zadd(presence.presence_key(), {user_id: time.time() - 3600})

    _notify(live_server, "While you are away", "online-2")
    wait_for(lambda: len(sink[1].messages) == 1, 15, "the e-mail once offline")
    assert sink[1].messages[0].message["Subject"] == "While you are away"
    assert _deliveries(live_server) == [("skipped", "online"), ("sent", None)]
