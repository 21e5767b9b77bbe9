"""The badge frame under BADGE_COUNTS: both counts carried, the configured one shown (issue 15, item 6)."""

from __future__ import annotations

import urllib.request

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.inbox.queries import BadgeCounts
from app.realtime.frames import render_frame
from tests.realtime.helpers import close_quietly, connect, frame_count, insert_notification, wait_for_count
from tests.support.html import one


@pytest.mark.parametrize(("mode", "shown", "label"), [("unread", "5", "5 unread"), ("unseen", "2", "2 new")])
def test_the_frame_shows_the_configured_count_and_carries_both(app, monkeypatch, mode, shown, label):
    monkeypatch.setitem(app.config, "BADGE_COUNTS", mode)
    with app.test_request_context():
        frame = render_frame(BadgeCounts(unread=5, unseen=2), [{"title": "Hi"}])
    badge = one(frame, "span#inbox-badge")
    assert badge.get_text() == shown and frame_count(frame) == int(shown)
    assert badge["aria-label"] == label and badge["hx-swap-oob"] == "true"
    assert (badge["data-unread"], badge["data-unseen"]) == ("5", "2")
    assert "Hi" in frame  # the toast still rides along


@pytest.mark.committed
def test_opening_the_inbox_sends_zero_to_the_users_sockets_in_unseen_mode(live_server, make_user, monkeypatch):
    monkeypatch.setitem(live_server.config, "BADGE_COUNTS", "unseen")
    user_id, cookie = make_user()
    _, other_cookie = make_user()
    with live_server.app_context():
        first = insert_notification(user_id, title="Before the visit")
        for n in range(2):
            insert_notification(user_id, title=f"After {n}")
        db.session.execute(
            sa.text("UPDATE notifications SET created_at = now() - interval '1 hour' WHERE id = :id"), {"id": first}
        )
        db.session.execute(
            sa.text("INSERT INTO notification_last_seen VALUES (:u, now() - interval '30 minutes')"), {"u": user_id}
        )
        db.session.commit()
        db.session.remove()
    ws = connect(live_server.base_url, cookie)
    other = connect(live_server.base_url, other_cookie)
    try:
        frame = wait_for_count(ws, 2)  # on connect: the unseen badge
        badge = one(frame, "span#inbox-badge")
        assert (badge["data-unread"], badge["data-unseen"], badge["aria-label"]) == ("3", "2", "2 new")
        wait_for_count(other, 0)  # another user's socket, unaffected by this user's last-seen time

        request = urllib.request.Request(live_server.base_url + "/inbox", headers={"Cookie": f"session={cookie}"})
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - the test's own server
            assert response.status == 200

        frame = wait_for_count(ws, 0, timeout=1.0)  # another tab opened the inbox: live, no reload
        assert one(frame, "span#inbox-badge")["data-unread"] == "3"  # still unread, no longer new
    finally:
        close_quietly(ws)
        close_quietly(other)
