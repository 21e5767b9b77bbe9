"""Issue 28 item 5: after a read, the member's iPhones get a background push with the new badge, at most one
per user per APNS_BADGE_SYNC_SECONDS, coalesced: the sync runs at the window's end with the count then."""

from __future__ import annotations

import pytest

from app.devices import service as devices
from app.extensions import db, redis
from app.inbox import service as inbox
from app.providers.apns import close_connections
from app.queueing import badge_sync_key, get_queue
from app.unitofwork import commit
from jobs.devices import sync_badges
from tests.factories import NotificationFactory, UserFactory
from tests.support.apns_server import ApnsServer, device_token


@pytest.fixture
def apns(app, tmp_path, monkeypatch):
    with ApnsServer(tmp_path) as server:
        for name, value in server.settings().items():
            if name.startswith("APNS_"):
                monkeypatch.setitem(app.config, name, value)
        yield server
        close_connections()


def scheduled() -> list:
    """The badge-sync jobs waiting in the default queue's scheduled registry, as (args)."""
    queue = get_queue("default")
    jobs = [queue.fetch_job(job_id) for job_id in queue.scheduled_job_registry.get_job_ids()]
    return [job.args for job in jobs if job is not None and job.func_name == "jobs.devices.sync_badges"]


@pytest.fixture
def reader(apns):
    """A member with an iPhone and three unread notifications."""
    user = UserFactory()
    devices.register(user.id, {"platform": "ios", "token": device_token()})
    notes = [NotificationFactory(user_id=user.id, title=f"n{i}") for i in range(3)]
    commit().wait()
    redis.client().delete(badge_sync_key(user.id))
    return user, notes


@pytest.mark.committed
def test_reads_in_one_window_schedule_one_sync_that_sends_the_count_at_its_end(app, apns, reader):
    user, notes = reader
    inbox.mark_read(user.id, notes[0].id)
    commit().wait()
    inbox.mark_read(user.id, notes[1].id)
    commit().wait()
    assert scheduled() == [[[user.id]]]  # the second read rides on the first one's sync

    assert sync_badges([user.id]) == {"sent": 1, "failed": 0}
    (push,) = apns.received
    assert push.headers["apns-push-type"] == "background" and push.headers["apns-priority"] == "5"
    assert push.payload["aps"]["badge"] == 1  # read at the sync, not at the first read
    assert redis.client().get(badge_sync_key(user.id)) is None  # the next read schedules anew

    inbox.read_all(user.id)
    commit().wait()
    assert len(scheduled()) == 2
    sync_badges([user.id])
    assert apns.received[-1].payload["aps"]["badge"] == 0


@pytest.mark.committed
def test_a_member_without_an_iphone_or_a_server_without_apns_schedules_nothing(app, apns, monkeypatch):
    android_only = UserFactory()
    devices.register(android_only.id, {"platform": "android", "token": "fcm-token"})
    note = NotificationFactory(user_id=android_only.id)
    commit().wait()
    inbox.mark_read(android_only.id, note.id)
    commit().wait()
    assert scheduled() == []

    monkeypatch.setitem(app.config, "APNS_KEY_FILE", "")
    user = UserFactory()
    devices.register(user.id, {"platform": "ios", "token": device_token()})
    note = NotificationFactory(user_id=user.id)
    commit().wait()
    inbox.mark_read(user.id, note.id)
    commit().wait()
    assert scheduled() == []


@pytest.mark.committed
def test_a_turned_off_iphone_gets_no_badge_and_a_gone_one_is_invalidated(app, apns, reader):
    from tests.support.apns_server import Answer

    user, notes = reader
    phone = devices.register(user.id, {"platform": "ios", "token": (gone := device_token())})
    commit().wait()
    apns.script(gone, Answer.bad_device_token())
    first = db.session.execute(db.text("SELECT id FROM devices WHERE user_id = :u ORDER BY id LIMIT 1"),
                               {"u": user.id}).scalar()  # fmt: skip
    devices.set_enabled(user.id, first, False)
    commit().wait()
    sync_badges([user.id])
    assert [p.token for p in apns.received] == []  # the only enabled one was refused
    reason = db.session.execute(db.text("SELECT invalid_reason FROM devices WHERE id = :i"),
                                {"i": phone.device_id}).scalar()  # fmt: skip
    assert reason == "BadDeviceToken"
