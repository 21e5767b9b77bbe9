"""Bulk inbox actions (issue 33): one set-based statement per action, exact undo, other members' ids ignored."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.inbox import bulk, queries
from tests.factories import DeliveryFactory, NotificationFactory, UserFactory


def _now():
    return db.session.execute(sa.text("SELECT now()")).scalar()


def _row(notification_id: int):
    return db.session.execute(
        sa.text("SELECT read_at, archived_at, in_app, snoozed_until FROM notifications WHERE id = :id"),
        {"id": notification_id},
    ).one_or_none()


def _expire_undo():
    db.session.execute(sa.text("UPDATE inbox_undo SET expires_at = now() - interval '1 second'"))


def test_each_action_is_one_statement_over_the_set(member, statements):
    rows = NotificationFactory.create_batch(5, user_id=member.id)
    statements.clear()
    result = bulk.act_on_ids(member.id, "archive", [r.id for r in rows])
    assert result.count == 5 and result.token
    touching = [s for s in statements if "notifications" in s and "webhook" not in s]
    assert len(touching) == 1 and "inbox_undo" in touching[0]


def test_other_members_and_unknown_ids_are_ignored(member):
    mine = NotificationFactory(user_id=member.id)
    theirs = NotificationFactory(user_id=UserFactory().id)
    for action in bulk.ACTIONS:
        result = bulk.act_on_ids(member.id, action, [theirs.id, 999_999_999, 2**70, -1])
        assert result.count == 0 and result.token is None
    assert _row(theirs.id) == (None, None, True, None)
    assert bulk.act_on_ids(member.id, "read", [mine.id, theirs.id]).ids == [mine.id]


def test_a_tenant_scoped_call_touches_only_that_tenants_rows(member):
    ours = NotificationFactory(user_id=member.id, tenant_id=7)
    other = NotificationFactory(user_id=member.id, tenant_id=8)
    none = NotificationFactory(user_id=member.id)
    assert bulk.act_on_ids(member.id, "delete", [ours.id, other.id, none.id], tenant_id=7).ids == [ours.id]
    assert bulk.act_on_all(member.id, "archive", tenant_id=8).ids == [other.id]
    assert _row(none.id) == (None, None, True, None)


def test_too_many_ids_are_refused_whole(app, member, monkeypatch):
    monkeypatch.setitem(app.config, "INBOX_BULK_MAX_IDS", 3)
    rows = NotificationFactory.create_batch(4, user_id=member.id)
    with pytest.raises(bulk.TooManyIds):
        bulk.act_on_ids(member.id, "read", [r.id for r in rows])
    assert bulk.act_on_ids(member.id, "read", [rows[0].id] * 10 + [r.id for r in rows[1:3]]).count == 3  # repeats


def test_read_then_undo_puts_exactly_those_rows_back_unread(member):
    a, b = NotificationFactory.create_batch(2, user_id=member.id)
    earlier = NotificationFactory(user_id=member.id, read_at=_now())
    result = bulk.act_on_ids(member.id, "read", [a.id, b.id, earlier.id])
    assert result.ids == sorted([a.id, b.id])  # the read one was not changed, so undo leaves it read
    assert queries.badge_counts(member.id).unread == 0
    assert bulk.undo(member.id, result.token) == 2
    assert queries.badge_counts(member.id).unread == 2 and _row(earlier.id).read_at is not None
    assert bulk.undo(member.id, result.token) == 0  # used up


def test_archive_all_and_undo_restore_read_and_archived_state(member):
    unread = NotificationFactory(user_id=member.id)
    read = NotificationFactory(user_id=member.id, read_at=_now())
    archived = NotificationFactory(user_id=member.id, read_at=_now(), archived_at=_now())
    snoozed = NotificationFactory(user_id=member.id, read_at=_now(), snoozed_until=_now())
    result = bulk.act_on_all(member.id, "archive")
    assert result.ids == sorted([unread.id, read.id])  # neither the archived nor the snoozed row
    assert _row(unread.id).archived_at is not None and _row(unread.id).read_at is not None
    assert bulk.undo(member.id, result.token) == 2
    assert _row(unread.id)[:2] == (None, None) and _row(read.id).archived_at is None
    assert _row(archived.id).archived_at is not None and _row(snoozed.id).snoozed_until is not None


def test_delete_all_read_hides_only_read_rows_and_undo_brings_them_back(member):
    unread = NotificationFactory(user_id=member.id)
    read = NotificationFactory(user_id=member.id, read_at=_now())
    result = bulk.act_on_all(member.id, "delete")
    assert result.ids == [read.id] and _row(read.id).in_app is False
    assert [r["id"] for r in queries.notification_page(member.id).rows] == [unread.id]
    assert queries.notification_for(member.id, read.id) is None
    assert bulk.undo(member.id, result.token) == 1
    assert _row(read.id).in_app is True


def test_undo_needs_the_members_own_token_in_time(member):
    row = NotificationFactory(user_id=member.id)
    result = bulk.act_on_ids(member.id, "delete", [row.id])
    assert bulk.undo(UserFactory().id, result.token) == 0  # another member's undo: nothing
    _expire_undo()
    assert bulk.undo(member.id, result.token) == 0 and _row(row.id).in_app is False


def test_undo_leaves_a_row_changed_since(member):
    row = NotificationFactory(user_id=member.id)
    result = bulk.act_on_ids(member.id, "read", [row.id])
    bulk.act_on_ids(member.id, "archive", [row.id])  # archived meanwhile: stays archived (and read)
    assert bulk.undo(member.id, result.token) == 0
    assert _row(row.id).archived_at is not None and _row(row.id).read_at is not None


def test_deleting_a_snoozed_unread_row_never_wakes_it(member):
    row = NotificationFactory(user_id=member.id, read_at=_now(), snoozed_until=_now())
    bulk.act_on_ids(member.id, "delete", [row.id])
    assert _row(row.id).snoozed_until is None and queries.badge_counts(member.id).unread == 0


def test_deleting_skips_pending_escalations_like_a_read(member):
    row = NotificationFactory(user_id=member.id)
    delivery = DeliveryFactory(notification_id=row.id, channel="email", status="pending", escalation="read")
    bulk.act_on_ids(member.id, "delete", [row.id])
    status = db.session.execute(
        sa.text("SELECT status, skip_reason FROM notification_deliveries WHERE id = :id"), {"id": delivery.id}
    ).one()
    assert tuple(status) == ("skipped", "read")


def test_after_the_undo_time_a_deleted_row_is_removed_unless_kept_for_retention(app, member, monkeypatch):
    gone, kept_busy, archived = NotificationFactory.create_batch(3, user_id=member.id)
    DeliveryFactory(notification_id=kept_busy.id, channel="email", status="failed")  # in the DLQ: kept
    bulk.act_on_ids(member.id, "delete", [gone.id, kept_busy.id])
    bulk.act_on_ids(member.id, "archive", [archived.id])
    assert bulk.finish_expired(100) == bulk.Finished(0, 0)  # not yet
    _expire_undo()
    assert bulk.finish_expired(100) == bulk.Finished(3, 1)
    assert _row(gone.id) is None and _row(kept_busy.id).in_app is False and _row(archived.id).archived_at
    count = db.session.execute(sa.text("SELECT count(*) FROM inbox_undo")).scalar()
    assert count == 0

    monkeypatch.setitem(app.config, "INBOX_DELETE_KEEPS_FOR_RETENTION", True)
    kept = NotificationFactory(user_id=member.id)
    bulk.act_on_ids(member.id, "delete", [kept.id])
    _expire_undo()
    assert bulk.finish_expired(100) == bulk.Finished(1, 0)
    assert _row(kept.id).in_app is False and _row(kept.id).read_at is not None  # retention's read rule takes it
