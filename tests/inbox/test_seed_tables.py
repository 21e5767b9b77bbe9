"""The seed article's result tables, reproduced on its own dataset (2,000 users × 100 notifications).

The dataset is built once for the module inside an outer transaction that is rolled back at the end;
each test runs in a savepoint of it (the same discipline as tests/conftest.py's db_session). Users are
inserted with the seed's ids (OVERRIDING SYSTEM VALUE) because notifications reference users. Identity
columns keep counting across rolled-back runs, so ids are compared after subtracting the first id.
"""

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.inbox import queries, service
from app.preferences.queries import resolve
from app.web.templating import badge_text
from tests.conftest import session_bound_to
from tests.inbox.seed_dataset import SEED_NOTIFICATIONS_SQL, SEED_TYPES_SQL

JST = timezone(timedelta(hours=9))
TITLE = "予約 #{} にコメントが付きました"

SEED_SQL = [
    """INSERT INTO users (id, email, display_name)
       OVERRIDING SYSTEM VALUE
       SELECT u, 'seed' || u || '@example.com', 'Seed ' || u FROM generate_series(1, 2000) u""",
    SEED_TYPES_SQL,
    SEED_NOTIFICATIONS_SQL,
    """INSERT INTO announcements (title, body, published_at)
       SELECT 'お知らせ ' || n, '本文', timestamptz '2026-08-01 10:00+09' + n * interval '1 day'
       FROM generate_series(1, 50) n""",
    """INSERT INTO announcement_reads (user_id, announcement_id)
       SELECT u, a + (SELECT min(id) - 1 FROM announcements)
       FROM generate_series(1, 200) u, generate_series(1, 47) a""",
    "ANALYZE users, notifications, announcements, announcement_reads",
]


@pytest.fixture(scope="module")
def seed_connection(app):
    """One connection holding the seed dataset in an open transaction for the whole module."""
    with app.app_context():
        connection = db.engines[None].connect()
        outer = connection.begin()
        for statement in SEED_SQL:
            connection.execute(sa.text(statement))
        try:
            yield connection
        finally:
            outer.rollback()
            connection.close()


@pytest.fixture(autouse=True)
def db_session(app, seed_connection):
    """Run each test in a savepoint of the seeded transaction (overrides the suite's db_session)."""
    with app.app_context():
        savepoint = seed_connection.begin_nested()
        try:
            with session_bound_to(seed_connection) as session:
                yield session
        finally:
            savepoint.rollback()


def _scalar(sql: str, **params):
    return db.session.execute(sa.text(sql), params).scalar()


def _offset(table: str) -> int:
    return _scalar(f"SELECT min(id) - 1 FROM {table}")


def _notification_id(user_id: int, n: int) -> int:
    return _scalar("SELECT id FROM notifications WHERE user_id = :u AND dedupe_key = :k", u=user_id, k=f"comment:{n}")


def test_dataset_matches_the_seed():
    row = db.session.execute(
        sa.text("""
        SELECT count(*) AS n, count(*) FILTER (WHERE read_at IS NULL) AS unread,
               (SELECT count(*) FROM announcement_reads) AS reads FROM notifications""")
    ).one()
    assert tuple(row) == (200000, 10000, 9400)
    assert _scalar("SELECT 2000 * count(*) FROM announcements") == 100000  # rows if pre-created per user


def test_unread_counts_user_42_and_announcements_for_42_and_1500():
    assert _scalar("SELECT count(*) FROM notifications WHERE user_id = 42 AND read_at IS NULL") == 5
    assert queries.unread_counts(42) == queries.UnreadCounts(personal=5, announcements=3)
    assert queries.unread_counts(1500).announcements == 50


def test_badge_for_user_7_is_8():
    assert queries.badge_count(7) == 8
    assert badge_text(queries.badge_count(7)) == "8"


def test_method_c_last_seen_for_user_7():
    # The seed's method C: seen at 2026-09-25 00:00+09, six rows are newer. One of them (n = 95) is read,
    # and a row read elsewhere is not unseen here, so the unseen badge is 5; the unread one stays 8.
    db.session.execute(sa.text("INSERT INTO notification_last_seen VALUES (7, timestamptz '2026-09-25 00:00+09')"))
    newer = "SELECT count(*) FROM notifications WHERE user_id = 7 AND created_at > timestamptz '2026-09-25 00:00+09'"
    assert _scalar(newer) == 6
    assert queries.unseen_count(7) == 5
    assert queries.badge_counts(7) == queries.BadgeCounts(unread=8, unseen=5)
    assert service.record_seen(7) is True
    assert queries.badge_counts(7) == queries.BadgeCounts(unread=8, unseen=0)


def test_first_page_and_keyset_page_two_for_user_42():
    offset = _offset("notifications")
    first = queries.notification_page(42, limit=5)
    assert [(r["id"] - offset, r["title"], r["unread"], r["created_at"]) for r in first.rows] == [
        (198042, TITLE.format(100), True, datetime(2026, 9, 26, 9, tzinfo=JST)),
        (196042, TITLE.format(99), True, datetime(2026, 9, 26, 3, tzinfo=JST)),
        (194042, TITLE.format(98), True, datetime(2026, 9, 25, 21, tzinfo=JST)),
        (192042, TITLE.format(97), True, datetime(2026, 9, 25, 15, tzinfo=JST)),
        (190042, TITLE.format(96), True, datetime(2026, 9, 25, 9, tzinfo=JST)),
    ]
    second = queries.notification_page(42, cursor=first.next_cursor, limit=3)
    assert [(r["id"] - offset, r["title"], r["unread"], r["created_at"]) for r in second.rows] == [
        (188042, TITLE.format(95), False, datetime(2026, 9, 25, 3, tzinfo=JST)),
        (186042, TITLE.format(94), False, datetime(2026, 9, 24, 21, tzinfo=JST)),
        (184042, TITLE.format(93), False, datetime(2026, 9, 24, 15, tzinfo=JST)),
    ]


def test_announcement_list_for_user_42():
    offset = _offset("announcements")
    rows = queries.active_announcements(42, limit=5)
    assert [(r["id"] - offset, r["title"], r["unread"]) for r in rows] == [
        (50, "お知らせ 50", True),
        (49, "お知らせ 49", True),
        (48, "お知らせ 48", True),
        (47, "お知らせ 47", False),
        (46, "お知らせ 46", False),
    ]


def test_mark_read_twice_then_another_user_then_read_all():
    newest = _notification_id(42, 100)
    assert [service.mark_read(42, newest), service.mark_read(42, newest), service.mark_read(43, newest)] == [1, 0, 0]
    assert service.read_all(42).notifications == 4


def test_announcement_reads_single_and_all():
    fifty = _offset("announcements") + 50
    assert [service.read_announcement(42, fifty), service.read_announcement(42, fifty)] == [1, 0]
    assert service.read_all(42).announcements == 2
    assert service.read_all(1500).announcements == 50
    assert queries.unread_counts(1500).announcements == 0


def test_preference_matrix_for_user_42_keeps_security_email_on():
    db.session.execute(
        sa.text("""
        INSERT INTO notification_preferences (user_id, type, channel, enabled) VALUES
          (42, 'reservation_approved', 'email', false),
          (42, 'comment', 'push', true),
          (42, 'security', 'email', false)""")
    )
    assert [(c.type, c.channel, c.send, c.source) for c in resolve([42])] == [
        ("comment", "chat", False, "default"),  # chat too, on only for types that list it
        ("comment", "email", False, "default"),
        ("comment", "in_app", True, "default"),
        ("comment", "push", True, "user"),
        ("comment", "sms", False, "default"),  # SMS is on only for types that list it (default_channels)
        ("reservation_approved", "chat", False, "default"),
        ("reservation_approved", "email", False, "user"),
        ("reservation_approved", "in_app", True, "default"),
        ("reservation_approved", "push", True, "default"),
        ("reservation_approved", "sms", False, "default"),
        ("reservation_remind", "chat", False, "default"),
        ("reservation_remind", "email", False, "default"),
        ("reservation_remind", "in_app", True, "default"),
        ("reservation_remind", "push", True, "default"),
        ("reservation_remind", "sms", False, "default"),
        ("security", "chat", False, "mandatory"),
        ("security", "email", True, "mandatory"),
        ("security", "in_app", True, "mandatory"),
        ("security", "push", False, "mandatory"),
        ("security", "sms", False, "mandatory"),
    ]
