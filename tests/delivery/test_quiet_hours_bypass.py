"""Quiet hours per channel and type (issue 29): SMS waits for them even for urgent types, unless the type is
marked bypass_quiet_hours, which skips them on every channel."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from app.delivery.policy import plan, skips_quiet_hours
from app.delivery.queries import BatchRow
from app.extensions import db
from jobs.delivery import deliver_batch
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.delivery import reload
from tests.support.twilio_server import serving_app

NOW = datetime(2026, 3, 1, 14, 0, tzinfo=UTC)  # 23:00 in Tokyo: inside 22:00–07:00
QUIET_END = datetime(2026, 3, 1, 22, 0, tzinfo=UTC)  # 07:00 the next morning in Tokyo


def row(channel: str = "sms", priority: str = "default", mandatory: bool = False, bypass: bool = False) -> BatchRow:
    return BatchRow(id=1, channel=channel, attempts=0, locked_until=NOW, notification_id=1, type="t", title="T",
                    body="B", link_path=None, data={}, user_id=1, email="a@example.com", display_name="A",
                    locale="en", timezone="Asia/Tokyo", quiet_hours_start=time(22), quiet_hours_end=time(7),
                    type_label="T", priority=priority, mandatory=mandatory, allowed=True, suppressed=False,
                    phone="+819012345678", phone_usable=True, sms_opt_in=True,
                    bypass_quiet_hours=bypass)  # fmt: skip


@pytest.mark.parametrize(
    "kwargs, waits",
    [
        ({"channel": "sms"}, True),
        ({"channel": "sms", "priority": "high"}, True),  # a high SMS without the flag waits for the morning
        ({"channel": "sms", "mandatory": True}, True),
        ({"channel": "sms", "bypass": True}, False),
        ({"channel": "email"}, True),
        ({"channel": "email", "priority": "high"}, False),  # e-mail and push: urgent types still skip them
        ({"channel": "push", "mandatory": True}, False),
        ({"channel": "email", "bypass": True}, False),
        ({"channel": "push", "bypass": True}, False),
    ],
)
def test_quiet_hours_by_channel_priority_and_the_types_flag(kwargs, waits):
    decisions = plan([row(**kwargs)], configured=True, now=NOW)
    assert skips_quiet_hours(row(**kwargs)) is not waits
    if waits:
        assert [until for _, until in decisions.defer] == [QUIET_END] and decisions.send == []
    else:
        assert decisions.defer == [] and len(decisions.send) == 1


def test_outside_quiet_hours_everything_goes():
    later = NOW + timedelta(hours=9)  # 08:00 in Tokyo
    decisions = plan([row(), row(channel="email")], configured=True, now=later)
    assert len(decisions.send) == 2 and decisions.defer == []


# --- through the engine, to a local Twilio ------------------------------------------------------------------


@pytest.fixture
def twilio(app, monkeypatch):
    with serving_app(app, monkeypatch) as server:
        yield server


def _sleeping_member():
    """A member with a verified number, consent, and quiet hours from an hour ago to an hour from now."""
    local_now = datetime.now(UTC).astimezone(ZoneInfo("Asia/Tokyo"))
    start = (local_now - timedelta(hours=1)).time().replace(microsecond=0)
    end = (local_now + timedelta(hours=1)).time().replace(second=0, microsecond=0)
    return UserFactory(phone="+819012345678", phone_verified_at=datetime.now(UTC), sms_opt_in=True,
                       timezone="Asia/Tokyo", quiet_hours_start=start, quiet_hours_end=end)  # fmt: skip


def _sms(user, **type_fields):
    kind = NotificationTypeFactory(type="alert", label="Alert", default_channels=["sms"], **type_fields)
    note = NotificationFactory(user_id=user.id, type=kind.type, title="Alert", body="Look")
    delivery = DeliveryFactory(notification_id=note.id, channel="sms")
    db.session.commit()
    return delivery


@pytest.mark.committed
def test_a_high_priority_sms_without_the_flag_waits_for_quiet_hours_to_end(app, twilio):
    delivery = _sms(_sleeping_member(), priority="high")

    assert deliver_batch("sms", [delivery.id]).get("deferred") == 1
    row_ = reload(delivery)
    assert (row_.status, row_.attempts) == ("pending", 0) and row_.next_attempt_at > datetime.now(UTC)
    assert twilio.received == []


@pytest.mark.committed
def test_a_bypass_quiet_hours_type_reaches_the_phone_at_night(app, twilio):
    delivery = _sms(_sleeping_member(), priority="high", bypass_quiet_hours=True)

    assert deliver_batch("sms", [delivery.id]).get("sent") == 1
    assert [m.to for m in twilio.received] == ["+819012345678"]
