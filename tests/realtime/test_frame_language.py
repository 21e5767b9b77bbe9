"""Badge and toast frames in each socket's language (issue 17): counted once per user, rendered per language."""

from __future__ import annotations

import re

import pytest

from app.extensions import db
from app.inbox.queries import BadgeCounts
from app.live.publish import publish_badge
from app.realtime.frames import render_frame
from tests.realtime.helpers import close_quietly, connect, insert_notification, wait_for_frame
from tests.realtime.test_hub import FakeSocket, HandClock, clocked, counting  # noqa: F401 - fixtures
from tests.support.html import attrs, one


def test_one_count_one_render_per_language(app, clocked, counting):  # noqa: F811
    hub, _ = clocked
    japanese, english, also_japanese = FakeSocket(), FakeSocket(), FakeSocket()
    conns = [hub.connect(7, japanese, language="ja"), hub.connect(7, english, language="en")]
    conns.append(hub.connect(7, also_japanese, language="ja"))
    hub.notify(7, {"title": "会議の招待"})
    assert hub.flush_due() == 1 and len(counting.calls) == 1  # one count for the user, whatever the languages
    for conn in conns:
        conn.write_pending()
    ja, en = japanese.sent[-1], english.sent[-1]
    assert also_japanese.sent[-1] == ja
    assert one(ja, "#inbox-badge")["aria-label"] == "未読 1 件"
    assert "新しい通知：" in one(ja, ".toast__link").get_text() and "会議の招待" in ja
    assert attrs(ja, ".toast__close", "aria-label") == ["閉じる"]
    assert one(en, "#inbox-badge")["aria-label"] == "1 unread"
    assert "New notification:" in one(en, ".toast__link").get_text()
    assert attrs(en, ".toast__close", "aria-label") == ["Dismiss"]


def test_a_socket_without_a_language_gets_the_default(app, clocked, counting):  # noqa: F811
    hub, _ = clocked
    ws = FakeSocket()
    conn = hub.connect(8, ws)
    assert conn.language == "en"
    hub.notify(8, {"title": "Hi"})
    hub.flush_due()
    conn.write_pending()
    assert "New notification:" in ws.sent[-1]


def test_the_greeting_speaks_the_sockets_language(app, counting):  # noqa: F811
    from app.realtime.hub import Hub

    hub = Hub(app, clock=HandClock())
    try:
        ws = FakeSocket()
        conn = hub.connect(9, ws, language="ja")
        with app.test_request_context():  # the handshake's request (English: no header, no user)
            assert hub.greet(conn)
        assert re.fullmatch(r"未読 \d+ 件", one(ws.sent[0], "#inbox-badge")["aria-label"])
    finally:
        hub.shutdown(timeout=1)


def test_render_frame_follows_the_current_locale(app):
    from flask_babel import force_locale

    with app.test_request_context(), force_locale("ja"):
        frame = render_frame(BadgeCounts(unread=120, unseen=0), [{"title": "x"}])
    assert one(frame, "#inbox-badge")["aria-label"] == "未読 99+ 件"


@pytest.mark.committed
def test_the_handshake_records_the_users_language(live_server, make_user):
    user_id, cookie = make_user(locale="ja", timezone="Asia/Tokyo")
    with live_server.app_context():
        insert_notification(user_id, title="First")
        db.session.remove()
    ws = connect(live_server.base_url, cookie)
    try:
        frame = wait_for_frame(ws, lambda f: "inbox-badge" in f)
        assert one(frame, "#inbox-badge")["aria-label"] == "未読 1 件"
        with live_server.app_context():
            insert_notification(user_id, title="二通目")
            publish_badge([user_id], {"title": "二通目"})
            db.session.remove()
        frame = wait_for_frame(ws, lambda f: "toast" in f)
        assert "新しい通知：" in frame and "二通目" in frame
    finally:
        close_quietly(ws)
