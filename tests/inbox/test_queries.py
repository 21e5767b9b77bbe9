"""Inbox reads: the capped badge, keyset pages, filters, hidden rows and announcements."""

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.inbox import queries
from app.web.templating import badge_text
from tests.factories import AnnouncementFactory, NotificationFactory, UserFactory

T0 = datetime(2026, 9, 1, tzinfo=UTC)


def _now():
    return db.session.execute(sa.text("SELECT now()")).scalar()


def _bulk(user_id: int, count: int, *, unread: bool = True, start: int = 0) -> None:
    db.session.execute(
        sa.text("""
        INSERT INTO notifications (user_id, type, title, body, dedupe_key, read_at, created_at)
        SELECT :user_id, 'comment', 'Bulk ' || n, 'b', 'bulk:' || n,
               CASE WHEN :unread THEN NULL ELSE now() END, now() - n * interval '1 minute'
        FROM generate_series(:start + 1, :start + :count) n
    """),
        {"user_id": user_id, "count": count, "unread": unread, "start": start},
    )


def test_badge_adds_personal_unread_and_unread_active_announcements(member):
    other = UserFactory()
    NotificationFactory.create_batch(3, user_id=member.id)
    NotificationFactory(user_id=member.id, read_at=_now())
    NotificationFactory(user_id=member.id, read_at=_now(), in_app=False)  # hidden rows are born read
    NotificationFactory.create_batch(2, user_id=other.id)
    read_one, _unread = AnnouncementFactory(), AnnouncementFactory()
    AnnouncementFactory(expires_at=_now() - timedelta(minutes=1))  # expired
    AnnouncementFactory(published_at=_now() + timedelta(days=1))  # scheduled
    db.session.execute(
        sa.text("INSERT INTO announcement_reads (user_id, announcement_id) VALUES (:u, :a)"),
        {"u": member.id, "a": read_one.id},
    )

    counts = queries.unread_counts(member.id)
    assert (counts.personal, counts.announcements) == (3, 1)
    assert queries.badge_count(member.id) == 4
    assert queries.badge_count(other.id) == 2 + 2


def test_badge_stops_counting_at_the_cap(member):
    _bulk(member.id, 150)
    AnnouncementFactory.create_batch(3)
    counts = queries.unread_counts(member.id)
    assert counts.personal == queries.BADGE_CAP == 100
    assert counts.total == 103
    assert badge_text(counts.total) == "99+"


@pytest.mark.parametrize("count, text", [(0, ""), (-1, ""), (1, "1"), (99, "99"), (100, "99+"), (200, "99+")])
def test_badge_text(count, text):
    assert badge_text(count) == text


def test_pages_walk_newest_first_without_overlap_or_gaps(member):
    _bulk(member.id, 45)
    first = queries.notification_page(member.id)
    assert [r["title"] for r in first.rows] == [f"Bulk {n}" for n in range(1, 21)]
    second = queries.notification_page(member.id, cursor=first.next_cursor)
    third = queries.notification_page(member.id, cursor=second.next_cursor)
    assert [r["title"] for r in second.rows] == [f"Bulk {n}" for n in range(21, 41)]
    assert [r["title"] for r in third.rows] == [f"Bulk {n}" for n in range(41, 46)]
    assert third.next_cursor is None


def test_rows_with_the_same_created_at_are_ordered_by_id_across_pages(member):
    rows = [NotificationFactory(user_id=member.id, created_at=T0) for _ in range(5)]
    ids = sorted((r.id for r in rows), reverse=True)
    first = queries.notification_page(member.id, limit=2)
    rest = queries.notification_page(member.id, cursor=first.next_cursor, limit=10)
    assert [r["id"] for r in first.rows + rest.rows] == ids


def test_exactly_one_page_has_no_next_cursor(member):
    _bulk(member.id, queries.PAGE_SIZE)
    page = queries.notification_page(member.id)
    assert len(page.rows) == queries.PAGE_SIZE and page.next_cursor is None


def test_filters_and_hidden_rows(member):
    unread = NotificationFactory(user_id=member.id, title="unread")
    read = NotificationFactory(user_id=member.id, title="read", read_at=_now())
    archived = NotificationFactory(user_id=member.id, title="archived", read_at=_now(), archived_at=_now())
    NotificationFactory(user_id=member.id, title="hidden", read_at=_now(), in_app=False)
    NotificationFactory(user_id=UserFactory().id, title="someone else's")

    def titles(name):
        return {r["title"] for r in queries.notification_page(member.id, name).rows}

    assert titles("all") == {"unread", "read"}
    assert titles("unread") == {"unread"}
    assert titles("archived") == {"archived"}
    assert titles("nonsense") == titles("all")
    assert queries.notification_for(member.id, unread.id)["unread"] is True
    assert queries.notification_for(member.id, read.id)["unread"] is False
    assert queries.notification_for(member.id, archived.id)["archived_at"] is not None


def test_notification_for_refuses_hidden_rows_and_other_users(member):
    hidden = NotificationFactory(user_id=member.id, read_at=_now(), in_app=False)
    theirs = NotificationFactory(user_id=UserFactory().id)
    assert queries.notification_for(member.id, hidden.id) is None
    assert queries.notification_for(member.id, theirs.id) is None
    assert queries.notification_for(member.id, 10**12) is None


def test_announcements_show_read_state_and_only_active_ones(member):
    older = AnnouncementFactory(title="older", published_at=_now() - timedelta(days=2))
    newer = AnnouncementFactory(title="newer")
    AnnouncementFactory(title="expired", expires_at=_now() - timedelta(seconds=1))
    AnnouncementFactory(title="scheduled", published_at=_now() + timedelta(hours=1))
    db.session.execute(
        sa.text("INSERT INTO announcement_reads (user_id, announcement_id) VALUES (:u, :a)"),
        {"u": member.id, "a": older.id},
    )
    rows = queries.active_announcements(member.id)
    assert [(r["title"], r["unread"]) for r in rows] == [("newer", True), ("older", False)]
    assert queries.announcement_for(member.id, newer.id)["unread"] is True
    assert queries.announcement_for(UserFactory().id, older.id)["unread"] is True
