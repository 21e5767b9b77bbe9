"""Retention (issue 18 item 8): what each RETENTION_* rule deletes, what it keeps, in resumable keyset batches."""

from __future__ import annotations

import logging
import time

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.inbox.queries import badge_counts, unread_counts
from app.retention import service as retention
from app.sweeper import sweep_once
from tests.factories import AnnouncementFactory, NotificationTypeFactory, UserFactory

DAYS = {"RETENTION_READ_DAYS": 180, "RETENTION_ALL_DAYS": 730, "RETENTION_LEDGER_DAYS": 90}


@pytest.fixture
def settings(app, monkeypatch):
    """The default retention days, a small batch so the walks take several batches, no rest between walks."""
    for name, value in {
        **DAYS,
        "RETENTION_ANNOUNCEMENT_READS_DAYS": 30,
        "RETENTION_BATCH_SIZE": 10,
        "RETENTION_PASS_SECONDS": 60.0,
        "RETENTION_INTERVAL_SECONDS": 0.0,
        "RETENTION_BATCH_PAUSE_SECONDS": 0.0,
    }.items():
        monkeypatch.setitem(app.config, name, value)
    return app.config


@pytest.fixture
def member():
    NotificationTypeFactory(type="comment")
    NotificationTypeFactory(type="security", mandatory=True)
    return UserFactory()


def add(user, key: str, created_days: float, read_days: float | None = None, type_: str = "comment") -> int:
    """A notification created (and read) so many days ago; return its id."""
    return db.session.execute(
        sa.text(
            """INSERT INTO notifications (user_id, type, title, body, dedupe_key, created_at, read_at)
               VALUES (:user_id, :type, :key, 'Body', :key, now() - make_interval(secs => :created * 86400),
                       now() - make_interval(secs => :read * 86400))
               RETURNING id"""
        ),
        {"user_id": user.id, "type": type_, "key": key, "created": created_days, "read": read_days},
    ).scalar()


def add_delivery(notification_id: int, status: str, created_days: float, channel: str = "email", **extra) -> int:
    columns = {"skip_reason": None, **extra}
    return db.session.execute(
        sa.text(
            """INSERT INTO notification_deliveries (notification_id, user_id, channel, status, skip_reason, created_at)
               SELECT id, user_id, :channel, :status, :skip_reason, now() - make_interval(secs => :days * 86400)
               FROM notifications WHERE id = :n
               RETURNING id"""
        ),
        {"n": notification_id, "channel": channel, "status": status, "days": created_days, **columns},
    ).scalar()


def existing(table: str, ids) -> set[int]:
    rows = db.session.execute(sa.text(f"SELECT id FROM {table} WHERE id = ANY(:ids)"), {"ids": list(ids)})
    return set(rows.scalars())


def run_until_complete(config, passes: int = 50) -> dict[str, int]:
    """Sweep until a walk completes; return the rows deleted per step over all passes."""
    total = dict.fromkeys(retention.STEPS, 0)
    for _ in range(passes):
        progress = retention.sweep(config)
        for step, count in progress.deleted.items():
            total[step] += count
        if progress.complete:
            return total
    raise AssertionError("the retention walk did not complete")


def test_read_rows_go_after_read_days_unread_ones_and_mandatory_ones_wait_for_all_days(settings, member):
    gone = {
        add(member, "read-long-ago", 400, 200),
        add(member, "unread-ancient", 800),
        add(member, "mandatory-ancient", 800, type_="security"),
        add(member, "read-ancient", 900, 850),
    }
    kept = {
        add(member, "read-recently", 400, 10),  # old, but read 10 days ago
        add(member, "unread-old", 700),
        add(member, "mandatory-unread-old", 700, type_="security"),
        add(member, "read-yesterday", 2, 1),
        add(member, "new", 0),
    }
    # Filler so the walk takes several batches of 10.
    gone |= {add(member, f"filler-{n}", 300, 250) for n in range(35)}

    deleted = run_until_complete(settings)

    assert deleted["notifications"] == len(gone)
    assert existing("notifications", gone) == set()
    assert existing("notifications", kept) == kept


def test_the_badge_counts_do_not_move_for_the_rows_kept(settings, member):
    for n in range(30):
        add(member, f"read-{n}", 300, 200)  # deleted: read long ago
    for n in range(12):
        add(member, f"unread-{n}", 400 + n)  # kept: unread, younger than RETENTION_ALL_DAYS
    add(member, "mandatory", 600, type_="security")
    expired = AnnouncementFactory(expires_at=db.session.execute(sa.text("SELECT now() - interval '40 days'")).scalar())
    live = AnnouncementFactory()
    db.session.execute(
        sa.text("INSERT INTO announcement_reads (user_id, announcement_id) VALUES (:u, :a), (:u, :b)"),
        {"u": member.id, "a": expired.id, "b": live.id},
    )
    before = (unread_counts(member.id), badge_counts(member.id))

    deleted = run_until_complete(settings)

    assert deleted["notifications"] == 30 and deleted["announcement_reads"] == 1
    assert (unread_counts(member.id), badge_counts(member.id)) == before
    assert before[0].personal == 13


def test_a_pending_leased_or_dlq_delivery_keeps_its_notification_and_the_ledger_row(settings, member):
    held = {}
    for status in ("pending", "sending", "failed"):
        notification = add(member, f"ancient-{status}", 800)
        held[status] = (notification, add_delivery(notification, status, 800))
    digest_wait = add(member, "ancient-digest", 800)
    waiting = add_delivery(digest_wait, "skipped", 800, skip_reason="digested")
    sent_notification = add(member, "ancient-sent", 800)
    sent = add_delivery(sent_notification, "sent", 800)

    run_until_complete(settings)

    notifications = {n for n, _ in held.values()} | {digest_wait}
    assert existing("notifications", notifications) == notifications
    assert existing("notification_deliveries", [d for _, d in held.values()] + [waiting]) == {
        d for _, d in held.values()
    } | {waiting}
    assert existing("notifications", [sent_notification]) == set()
    assert existing("notification_deliveries", [sent]) == set()

    # The operator discards the DLQ row: the next walk lets both go.
    db.session.execute(
        sa.text("UPDATE notification_deliveries SET status = 'skipped', skip_reason = 'discarded: x' WHERE id = :id"),
        {"id": held["failed"][1]},
    )
    run_until_complete(settings)
    assert existing("notifications", [held["failed"][0]]) == set()
    assert existing("notifications", [held["pending"][0]]) == {held["pending"][0]}


def test_the_ledger_goes_after_ledger_days_with_attempts_and_events_and_unmatched_events_too(settings, member):
    notification = add(member, "recent", 120, 119.5)  # the notification is younger than RETENTION_READ_DAYS
    old_sent = add_delivery(notification, "sent", 100)
    old_skipped = add_delivery(notification, "skipped", 100, channel="push", skip_reason="preference")
    newer = add(member, "newer", 10)
    young = add_delivery(newer, "sent", 10)
    failed = add_delivery(newer, "failed", 100, channel="push")
    db.session.execute(
        sa.text(
            """INSERT INTO delivery_attempts (delivery_id, user_id, provider, outcome, started_at)
               SELECT v.id, d.user_id, v.provider, v.outcome, v.started_at
               FROM (VALUES (:a, 'smtp', 'sent', now() - interval '100 days'), (:b, 'smtp', 'sent', now()),
                            (:f, 'push', 'permanent', now() - interval '100 days'))
                    AS v(id, provider, outcome, started_at)
               JOIN notification_deliveries d ON d.id = v.id"""
        ),
        {"a": old_sent, "b": young, "f": failed},
    )
    db.session.execute(
        sa.text(
            """INSERT INTO provider_events (delivery_id, user_id, provider, provider_event_id, event, occurred_at,
                                           received_at)
               VALUES (:a, :u, 'mailgun', 'e1', 'delivered', now() - interval '100 days', now() - interval '100 days'),
                      (NULL, 0, 'mailgun', 'e2', 'delivered', now() - interval '95 days', now() - interval '95 days'),
                      (NULL, 0, 'mailgun', 'e3', 'delivered', now() - interval '5 days', now() - interval '5 days')"""
        ),
        {
            "a": old_sent,
            "u": db.session.execute(
                sa.text("SELECT user_id FROM notification_deliveries WHERE id = :a"), {"a": old_sent}
            ).scalar(),
        },
    )

    deleted = run_until_complete(settings)

    assert deleted["deliveries"] == 2 and deleted["provider_events"] == 1
    assert existing("notification_deliveries", [old_sent, old_skipped, young, failed]) == {young, failed}
    assert existing("notifications", [notification, newer]) == {notification, newer}
    attempts = db.session.execute(sa.text("SELECT delivery_id FROM delivery_attempts ORDER BY delivery_id"))
    assert sorted(attempts.scalars()) == sorted([young, failed])  # the DLQ row keeps its history
    events = db.session.execute(sa.text("SELECT provider_event_id FROM provider_events"))
    assert list(events.scalars()) == ["e3"]


def test_webhook_events_the_product_received_go_after_ledger_days_failed_and_waiting_ones_stay(settings, member):
    endpoint = db.session.execute(
        sa.text(
            """INSERT INTO webhook_endpoints (url, event_types, secret_sealed, secret_hint)
               VALUES ('https://product.example/hooks', ARRAY['notification.read'], 'sealed', 'abcd') RETURNING id"""
        )
    ).scalar()
    ids = {}
    for key, status, days in (("old_sent", "sent", 100), ("young_sent", "sent", 5), ("old_failed", "failed", 100),
                              ("old_pending", "pending", 100)):  # fmt: skip
        ids[key] = db.session.execute(
            sa.text(
                """INSERT INTO webhook_deliveries (endpoint_id, webhook_id, event_type, payload, occurred_at, status,
                                                   created_at)
                   VALUES (:endpoint, :key, 'notification.read', '{}', now(), :status,
                           now() - make_interval(secs => :days * 86400)) RETURNING id"""
            ),
            {"endpoint": endpoint, "key": key, "status": status, "days": days},
        ).scalar()
    db.session.execute(
        sa.text(
            """INSERT INTO webhook_attempts (delivery_id, endpoint_id, outcome, started_at)
               VALUES (:a, :e, 'sent', now() - interval '100 days'),
                      (:f, :e, 'permanent', now() - interval '100 days')"""
        ),
        {"a": ids["old_sent"], "f": ids["old_failed"], "e": endpoint},
    )

    deleted = run_until_complete(settings)

    assert deleted["webhook_events"] == 1
    kept = {ids["young_sent"], ids["old_failed"], ids["old_pending"]}
    assert existing("webhook_deliveries", ids.values()) == kept  # the failed list stays replayable
    attempts = db.session.execute(sa.text("SELECT delivery_id FROM webhook_attempts"))
    assert list(attempts.scalars()) == [ids["old_failed"]]


def test_expired_announcements_lose_their_reads_after_the_grace_days(settings, member):
    other = UserFactory()
    ago = lambda days: db.session.execute(  # noqa: E731 - a timestamp days ago, by the database's clock
        sa.text("SELECT now() - make_interval(days => :d)"), {"d": days}
    ).scalar()
    long_expired = AnnouncementFactory(published_at=ago(100), expires_at=ago(40))
    just_expired = AnnouncementFactory(published_at=ago(100), expires_at=ago(10))
    forever = AnnouncementFactory(published_at=ago(1000))
    for user in (member, other):
        for announcement in (long_expired, just_expired, forever):
            db.session.execute(
                sa.text("INSERT INTO announcement_reads (user_id, announcement_id) VALUES (:u, :a)"),
                {"u": user.id, "a": announcement.id},
            )

    assert run_until_complete(settings)["announcement_reads"] == 2

    left = db.session.execute(sa.text("SELECT DISTINCT announcement_id FROM announcement_reads"))
    assert set(left.scalars()) == {just_expired.id, forever.id}


def test_repeated_passes_change_nothing_and_a_short_pass_resumes_where_it_stopped(settings, member, redis_client):
    for n in range(60):
        add(member, f"unread-{n}", 400)  # kept: the walk steps over them
    gone = {add(member, f"read-{n}", 300, 200) for n in range(40)}

    # No time budget: each pass does its one batch and saves its place.
    passes = 0
    while True:
        passes += 1
        progress = retention.sweep(settings, seconds=0)
        assert progress.batches == 1
        if progress.complete:
            break
        assert passes < 30, progress
    assert passes >= 10  # 100 rows in batches of 10: the walk went on from its saved place each pass
    assert existing("notifications", gone) == set()
    kept = db.session.execute(sa.text("SELECT count(*) FROM notifications")).scalar()
    assert kept == 60

    again = run_until_complete(settings)
    assert again == dict.fromkeys(retention.STEPS, 0)
    assert db.session.execute(sa.text("SELECT count(*) FROM notifications")).scalar() == 60


def test_after_a_complete_walk_the_step_rests(settings, member, monkeypatch):
    monkeypatch.setitem(settings, "RETENTION_INTERVAL_SECONDS", 3600.0)
    add(member, "read", 300, 200)
    assert retention.sweep(settings).complete
    add(member, "read-2", 300, 200)
    resting = retention.sweep(settings)
    assert resting.resting and resting.batches == 0


def test_the_sweeper_pass_reports_the_progress_logs_it_and_metrics_count_it(settings, member, caplog, client):
    for n in range(25):
        add(member, f"read-{n}", 300, 200)
    db.session.commit()

    with caplog.at_level(logging.INFO, logger="app.retention.service"):
        result = sweep_once()

    assert result["retention_notifications"] == 25
    assert result["retention_batches"] >= 3 and result["retention_complete"] is True
    assert any("retention: deleted 25 notifications" in r.getMessage() for r in caplog.records)
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'hato_retention_deleted_total{step="notifications"} 25.0' in metrics
    assert "hato_retention_last_complete_walk_seconds " in metrics


@pytest.mark.committed  # a second connection holds a row lock
def test_a_row_someone_holds_is_skipped_not_waited_for_and_goes_in_the_next_walk(settings, member):
    ids = [add(member, f"read-{n}", 300, 200) for n in range(15)]
    db.session.commit()
    with db.engine.connect() as other:
        other.execute(sa.text("SELECT id FROM notifications WHERE id = :id FOR UPDATE"), {"id": ids[3]})

        started = time.monotonic()
        first = run_until_complete(settings)
        assert time.monotonic() - started < 2  # SKIP LOCKED: no wait for the held row
        other.rollback()
    assert first["notifications"] == 14
    assert existing("notifications", ids) == {ids[3]}
    db.session.commit()

    assert run_until_complete(settings)["notifications"] == 1
    assert existing("notifications", ids) == set()


def test_finished_topic_fanouts_go_after_ledger_days_and_a_running_one_stays(settings, member):
    ids = {}
    for key, status, days in (("old_done", "done", 100), ("young_done", "done", 5), ("old_failed", "failed", 100),
                              ("old_running", "running", 100)):  # fmt: skip
        ids[key] = db.session.execute(
            sa.text(
                """INSERT INTO topic_fanouts (topic_key, type, title, body, dedupe_key, status, created_at,
                                              finished_at)
                   VALUES ('project:42', 'comment', 't', 'b', :key, :status,
                           now() - make_interval(secs => :days * 86400),
                           CASE WHEN :status <> 'running' THEN now() - make_interval(secs => :days * 86400) END)
                   RETURNING id"""
            ),
            {"key": key, "status": status, "days": days},
        ).scalar()

    deleted = run_until_complete(settings)

    assert deleted["topic_fanouts"] == 2
    assert existing("topic_fanouts", ids.values()) == {ids["young_done"], ids["old_running"]}
