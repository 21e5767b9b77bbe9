"""Inbox writes: idempotent mark-read, archive, announcement reads and read-all, scoped to the owner."""

from datetime import timedelta

import sqlalchemy as sa

from app.extensions import db
from app.inbox import queries, service
from tests.factories import AnnouncementFactory, NotificationFactory, UserFactory
from tests.inbox.conftest import state


def _now():
    return db.session.execute(sa.text("SELECT now()")).scalar()


def _reads(user_id):
    return db.session.execute(
        sa.text("SELECT announcement_id, read_at FROM announcement_reads WHERE user_id = :u"), {"u": user_id}
    ).all()


def test_mark_read_twice_keeps_the_first_read_at(member):
    row = NotificationFactory(user_id=member.id)
    assert service.mark_read(member.id, row.id) == 1
    assert state(row.id).read_at is not None
    # The whole test is one transaction (now() never moves), so date the first read back by hand.
    first = _now() - timedelta(days=30)
    db.session.execute(sa.text("UPDATE notifications SET read_at = :t WHERE id = :id"), {"t": first, "id": row.id})
    assert service.mark_read(member.id, row.id) == 0
    assert state(row.id).read_at == first


def test_mark_read_with_another_users_id_changes_nothing(member):
    theirs = NotificationFactory(user_id=UserFactory().id)
    assert service.mark_read(member.id, theirs.id) == 0
    assert service.archive(member.id, theirs.id) == 0
    assert state(theirs.id) == (None, None)


def test_the_one_row_action_handler_acts_only_on_the_users_own_rows(member):
    mine, theirs = NotificationFactory(user_id=member.id), NotificationFactory(user_id=UserFactory().id)
    for action in ("read", "archive", "unarchive"):
        assert service.act_on(member.id, theirs.id, action) is None  # not theirs: nothing found, nothing done
    assert state(theirs.id) == (None, None)
    before = service.act_on(member.id, mine.id, "archive")
    assert before["id"] == mine.id and before["archived_at"] is None  # the row as it was
    assert state(mine.id).archived_at is not None
    assert service.act_on(member.id, mine.id, "unarchive")["archived_at"] is not None  # as it was: archived
    read_at, archived_at = state(mine.id)
    assert read_at is not None and archived_at is None


def test_archive_reads_the_row_and_is_idempotent(member):
    row = NotificationFactory(user_id=member.id)
    assert service.archive(member.id, row.id) == 1
    read_at, archived_at = state(row.id)
    assert read_at is not None and archived_at is not None
    assert service.archive(member.id, row.id) == 0
    assert state(row.id) == (read_at, archived_at)
    assert queries.badge_count(member.id) == 0


def test_archive_keeps_an_earlier_read_at(member):
    earlier = _now() - timedelta(days=3)
    row = NotificationFactory(user_id=member.id, read_at=earlier)
    service.archive(member.id, row.id)
    assert state(row.id).read_at == earlier


def test_unarchive_returns_the_row_read(member):
    row = NotificationFactory(user_id=member.id)
    service.archive(member.id, row.id)
    assert service.unarchive(member.id, row.id) == 1
    assert service.unarchive(member.id, row.id) == 0
    read_at, archived_at = state(row.id)
    assert read_at is not None and archived_at is None


def test_read_announcement_once_and_only_if_active(member):
    active = AnnouncementFactory()
    expired = AnnouncementFactory(expires_at=_now() - timedelta(minutes=1))
    assert service.read_announcement(member.id, active.id) == 1
    assert service.read_announcement(member.id, active.id) == 0
    assert service.read_announcement(member.id, expired.id) == 0
    assert [r.announcement_id for r in _reads(member.id)] == [active.id]


def test_read_all_is_the_seeds_two_statements_and_changes_nothing_twice(member):
    other = UserFactory()
    NotificationFactory.create_batch(4, user_id=member.id)
    NotificationFactory(user_id=member.id, read_at=_now())
    theirs = NotificationFactory(user_id=other.id)
    AnnouncementFactory.create_batch(2)
    AnnouncementFactory(expires_at=_now() - timedelta(minutes=1))

    first = service.read_all(member.id)
    assert (first.notifications, first.announcements, first.changed) == (4, 2, True)
    assert queries.badge_count(member.id) == 0
    before = sorted(_reads(member.id))
    second = service.read_all(member.id)
    assert (second.notifications, second.announcements, second.changed) == (0, 0, False)
    assert sorted(_reads(member.id)) == before
    assert state(theirs.id).read_at is None
    assert _reads(other.id) == []
