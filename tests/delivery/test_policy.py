"""Backoff with full jitter and quiet hours, with a pinned clock and random source."""

from __future__ import annotations

import random
from datetime import UTC, datetime, time, timedelta

import pytest

from app.delivery.policy import Backoff, next_state, quiet_until


class MaxRandom(random.Random):
    """uniform(a, b) always returns b: exposes the jitter window's upper bound."""

    def uniform(self, a, b):
        return b


def test_backoff_ceiling_doubles_from_base_up_to_the_cap():
    backoff = Backoff(base=2, cap=60, max_attempts=8, rng=MaxRandom())

    assert [backoff.delay(n) for n in range(1, 8)] == [2, 4, 8, 16, 32, 60, 60]


def test_backoff_is_full_jitter_and_reproducible_with_a_seed():
    first = Backoff(base=2, cap=600, max_attempts=8, rng=random.Random(42))
    again = Backoff(base=2, cap=600, max_attempts=8, rng=random.Random(42))

    delays = [first.delay(5) for _ in range(200)]

    assert delays[:5] == [again.delay(5) for _ in range(5)]
    assert all(0 <= d <= 32 for d in delays)
    assert min(delays) < 4 and max(delays) > 28  # spread over the whole window, not clustered at the top


def test_exhausted_after_max_attempts():
    backoff = Backoff(base=1, cap=10, max_attempts=3)

    assert [backoff.exhausted(n) for n in (1, 2, 3, 4)] == [False, False, True, True]


UTC = UTC


@pytest.mark.parametrize(
    ("now", "start", "end", "expected"),
    [
        # Tokyo is UTC+9: 14:30 UTC is 23:30 local, inside 22:00-07:00, ends 07:00 local = 22:00 UTC.
        (datetime(2026, 3, 1, 14, 30, tzinfo=UTC), time(22), time(7), datetime(2026, 3, 1, 22, 0, tzinfo=UTC)),
        # 03:00 local (18:00 UTC the day before): after midnight, still quiet, same-day end.
        (datetime(2026, 3, 1, 18, 0, tzinfo=UTC), time(22), time(7), datetime(2026, 3, 1, 22, 0, tzinfo=UTC)),
        # 12:00 local: outside.
        (datetime(2026, 3, 1, 3, 0, tzinfo=UTC), time(22), time(7), None),
        # A daytime window 09:00-17:00, 10:00 local.
        (datetime(2026, 3, 1, 1, 0, tzinfo=UTC), time(9), time(17), datetime(2026, 3, 1, 8, 0, tzinfo=UTC)),
        # The end itself is no longer quiet; equal start/end means no quiet hours.
        (datetime(2026, 3, 1, 8, 0, tzinfo=UTC), time(9), time(17), None),
        (datetime(2026, 3, 1, 1, 0, tzinfo=UTC), time(9), time(9), None),
    ],
)
def test_quiet_until_in_the_users_time_zone(now, start, end, expected):
    assert quiet_until(now, "Asia/Tokyo", start, end) == expected


def test_quiet_hours_follow_daylight_saving_time():
    # New York switches to EDT on 2026-03-08; 23:00 EST on the 7th = 04:00 UTC on the 8th.
    now = datetime(2026, 3, 8, 4, 0, tzinfo=UTC)

    assert quiet_until(now, "America/New_York", time(22), time(7)) == datetime(2026, 3, 8, 11, 0, tzinfo=UTC)


def test_unknown_time_zone_falls_back_to_utc():
    now = datetime(2026, 3, 1, 23, 0, tzinfo=UTC)

    assert quiet_until(now, "Mars/Olympus", time(22), time(7)) == datetime(2026, 3, 2, 7, 0, tzinfo=UTC)


NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def test_a_row_some_of_whose_targets_failed_for_now_comes_back_after_the_backoff():
    backoff = Backoff(base=2, cap=60, max_attempts=3, rng=MaxRandom())

    assert next_state("sent", None, None, 1, backoff, now=NOW, waiting=True) == ("pending", None, 2)
    assert next_state("sent", None, 30, 1, backoff, now=NOW, waiting=True) == ("pending", None, 30)  # Retry-After
    assert next_state("sent", None, None, 3, backoff, now=NOW, waiting=True) == ("sent", None, 0.0)  # tries used up


def test_a_row_with_held_targets_comes_back_just_after_the_hold():
    backoff = Backoff(base=2, cap=60, max_attempts=3, rng=MaxRandom())
    held = NOW + timedelta(minutes=10)

    assert next_state("sent", None, None, 1, backoff, now=NOW, held_until=held) == ("pending", None, 601.0)
    expires = NOW + timedelta(minutes=5)  # a chain's row gives up sooner: it reached someone, so it is sent
    assert next_state("sent", None, None, 1, backoff, expires, now=NOW, held_until=held) == ("sent", None, 0.0)
    assert next_state("sent", None, None, 1, backoff, now=NOW) == ("sent", None, 0.0)  # everyone took it
