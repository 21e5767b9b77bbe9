"""Pure delivery decisions: the re-check before sending, quiet hours, and backoff with full jitter.

No I/O here: the clock and the random source are arguments, so tests pin both.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta

from app.delivery.queries import BatchRow
from app.timezones import zone

# A channel's own reason a row cannot go out (email: no address, suppressed), or None.
ChannelCheck = Callable[[BatchRow], str | None]


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter: uniform(0, min(cap, base * 2**(n-1))) after try n."""

    base: float
    cap: float
    max_attempts: int
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def ceiling(self, attempts: int) -> float:
        """The largest delay after `attempts` tries (the jitter window's upper bound)."""
        return min(self.cap, self.base * 2 ** max(attempts - 1, 0))

    def delay(self, attempts: int) -> float:
        """Seconds to wait after `attempts` tries (full jitter spreads a thundering herd)."""
        return self.rng.uniform(0, self.ceiling(attempts))

    def exhausted(self, attempts: int) -> bool:
        """Whether `attempts` tries are all we may make."""
        return attempts >= self.max_attempts


def quiet_until(now: datetime, tz_name: str | None, start: time | None, end: time | None) -> datetime | None:
    """Return when the user's quiet hours end (UTC) if `now` falls inside them, else None."""
    if start is None or end is None or start == end:
        return None
    tz = zone(tz_name)
    local = now.astimezone(tz)
    clock = local.time().replace(tzinfo=None)
    inside = (start <= clock < end) if start < end else (clock >= start or clock < end)
    if not inside:
        return None
    day = local.date() if clock < end else local.date() + timedelta(days=1)
    return datetime.combine(day, end, tzinfo=tz).astimezone(UTC)


@dataclass
class Plan:
    """What to do with each claimed row: skip it, defer it, or send it now."""

    skip: list[tuple[BatchRow, str]] = field(default_factory=list)
    defer: list[tuple[BatchRow, datetime]] = field(default_factory=list)
    send: list[BatchRow] = field(default_factory=list)


def skip_reason(row: BatchRow, configured: bool, channel_check: ChannelCheck = lambda row: None) -> str | None:
    """Why row must not go out at all, or None: no provider, the preference, then the channel's own check."""
    if not configured:
        return f"{row.channel}_not_configured"
    if not row.allowed:
        return "preference_off"
    return channel_check(row)


def plan(rows: Iterable[BatchRow], configured: bool, now: datetime,
         channel_check: ChannelCheck = lambda row: None) -> Plan:  # fmt: skip
    """Re-check every claimed row just before sending (provider, preference, the channel's check, quiet hours)."""
    result = Plan()
    for row in rows:
        reason = skip_reason(row, configured, channel_check)
        if reason:
            result.skip.append((row, reason))
            continue
        # Urgent and mandatory messages (sign-in codes, security alerts) ignore quiet hours.
        until = (
            None
            if (row.mandatory or row.priority == "high")
            else quiet_until(now, row.timezone, row.quiet_hours_start, row.quiet_hours_end)
        )
        if until is not None:
            result.defer.append((row, until))
        else:
            result.send.append(row)
    return result


def require_targets(decisions: Plan, reachable_users: set[int], reason: str) -> None:
    """Move rows whose user has nowhere to receive them (no push subscription) from send to skip."""
    keep = []
    for row in decisions.send:
        if row.user_id in reachable_users:
            keep.append(row)
        else:
            decisions.skip.append((row, reason))
    decisions.send = keep
