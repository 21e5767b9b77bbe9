"""Pure delivery decisions: the re-check before sending (escalation, online routing), quiet hours, backoff.

No I/O here: the clock and the random source are arguments, so tests pin both.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta

from app.delivery.queries import BatchRow
from app.timezones import zone
from app.workflows import conditions

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


# Rows held by a kill switch wait "until resumed": resuming the channel or provider makes them due again
# (app/delivery/switches.py); DELIVERY_MAX_AGE still expires them, counted from when the holding began.
UNTIL_RESUMED = datetime(9999, 1, 1, tzinfo=UTC)
# Rows whose every target is on a paused part of a provider (APNs within push) wait until no part of the
# channel is paused any more: a mark of their own, so that the open channel's release does not take them.
UNTIL_PART_RESUMED = datetime(9998, 1, 1, tzinfo=UTC)


@dataclass
class Plan:
    """What to do with each claimed row: skip it (why), defer it (until; quiet hours), hold it (until; a
    paused channel or a closed endpoint: DELIVERY_MAX_AGE counts), or send it now."""

    skip: list[tuple[object, str]] = field(default_factory=list)
    defer: list[tuple[object, datetime]] = field(default_factory=list)
    hold: list[tuple[object, datetime]] = field(default_factory=list)
    send: list = field(default_factory=list)
    # Rows every remaining target of which is gone, after some took it on an earlier try: sent, no try now.
    done: list = field(default_factory=list)


def next_state(
    outcome: str,
    kind: str | None,
    retry_after: float | None,
    attempts: int,
    backoff: Backoff,
    expires_at: datetime | None = None,
    now: datetime | None = None,
    waiting: bool = False,
    held_until: datetime | None = None,
) -> tuple[str, str | None, float]:
    """(status, error kind, delay) of a row after its `attempts`-th try ended with outcome.

    sent → sent, or pending again when only some of its targets took it (the others waiting: failed for now,
    or held until held_until); permanent → failed (the DLQ) with its kind; transient → pending after the backoff, or
    failed as `exhausted` once the tries are used up, or as `expired` when the next try would come after
    expires_at (a row of a "first" chain gives up by DELIVERY_MAX_AGE, so the next channel gets its turn).
    A provider's own "retry after" is a floor under the backoff, but never beyond its cap: the hint may
    come from whoever runs the endpoint (issue 14), and a row must come round again.
    """
    if outcome == "sent" and (waiting or held_until is not None):
        # Some targets took it and the others wait (failed for now, or held until held_until): the row comes
        # back for them alone, unless its tries or its time are up (then it stays sent: it reached someone).
        now = now or datetime.now(UTC)
        if backoff.exhausted(attempts):
            return "sent", None, 0.0
        delay = min(max(backoff.delay(attempts), retry_after or 0.0), backoff.cap) if waiting else 0.0
        if held_until is not None:  # a second past it: a hold "until resumed" keeps its mark (switches.py)
            delay = max(delay, (held_until - now).total_seconds() + 1.0)
        if expires_at is not None and now + timedelta(seconds=delay) > expires_at:
            return "sent", None, 0.0
        return "pending", None, delay
    if outcome == "sent":
        return "sent", None, 0.0
    if outcome == "permanent":
        return "failed", kind or "permanent", 0.0
    if backoff.exhausted(attempts):
        return "failed", "exhausted", 0.0
    delay = min(max(backoff.delay(attempts), retry_after or 0.0), backoff.cap)
    if expires_at is not None and (now or datetime.now(UTC)) + timedelta(seconds=delay) > expires_at:
        return "failed", "expired", 0.0
    return "pending", None, delay


def escalation_reason(row: BatchRow) -> str | None:
    """Why an escalation is no longer needed ('read' / 'seen'), or None (also for rows that do not escalate)."""
    if row.escalation is None:
        return None
    if row.read:  # a read row is seen too, so reading cancels either kind
        return "read"
    if row.escalation == "seen" and row.seen:
        return "seen"
    return None


def condition_context(row: BatchRow) -> dict:
    """What a workflow condition sees when row's step is due (app/workflows/conditions.py)."""
    tenant = {"key": row.tenant_key, "name": row.tenant_name} if row.tenant_key else None
    return conditions.context(row.data, vars(row), read=row.read, seen=row.seen, type_=row.type, tenant=tenant)


def workflow_reason(row: BatchRow) -> str | None:
    """Why row's workflow step does not run now: an exit before it holds ('workflow_exit'), or its own condition
    does not ('condition'); None for a row without a step or conditions."""
    if not row.exits and row.condition is None:
        return None
    context = condition_context(row)
    if any(conditions.evaluate(source, context) for source in row.exits or ()):
        return "workflow_exit"
    if row.condition is not None and not conditions.evaluate(row.condition, context):
        return "condition"
    return None


def skip_reason(row: BatchRow, configured: bool, channel_check: ChannelCheck = lambda row: None,
                online: AbstractSet[int] = frozenset()) -> str | None:  # fmt: skip
    """Why row must not go out at all, or None: no provider, the preference, the escalation, the channel's own
    check, then the user being online for a type that skips e-mail/push then."""
    if not configured:
        return f"{row.channel}_not_configured"
    if not row.allowed:
        return "preference_off"
    reason = escalation_reason(row) or workflow_reason(row) or channel_check(row)
    if reason:
        return reason
    if row.skip_when_online and row.user_id in online:
        return "online"
    if row.channel == "email" and row.frequency != "immediate":
        return "digested"  # the user's hourly/daily digest sends it (app/digests)
    return None


def skips_quiet_hours(row: BatchRow) -> bool:
    """Whether row goes out during the member's quiet hours.

    A type marked bypass_quiet_hours (sign-in codes) does on every channel. Otherwise an SMS waits: a text
    wakes the phone of someone asleep, so a type being mandatory or high priority is not reason enough. On
    the other channels mandatory and high-priority types (security alerts) still go at once, as before.
    """
    if row.bypass_quiet_hours:
        return True
    if row.channel == "sms":
        return False
    return row.mandatory or row.priority == "high"


def plan(rows: Iterable[BatchRow], configured: bool, now: datetime,
         channel_check: ChannelCheck = lambda row: None, online: AbstractSet[int] = frozenset()) -> Plan:  # fmt: skip
    """Re-check every claimed row just before sending (provider, preference, escalation, the channel's check,
    online routing, quiet hours); `online` holds the users with a live socket."""
    result = Plan()
    for row in rows:
        reason = skip_reason(row, configured, channel_check, online)
        if reason:
            result.skip.append((row, reason))
            continue
        until = None if skips_quiet_hours(row) else quiet_until(now, row.timezone, row.quiet_hours_start,
                                                                  row.quiet_hours_end)  # fmt: skip
        if until is not None:
            result.defer.append((row, until))
        else:
            result.send.append(row)
    return result


def waits_for_tab(row: BatchRow) -> bool:
    """Whether row is a push of a push_when_offline type (it goes only if no open tab showed the notification)."""
    return row.push_when_offline and row.channel == "push"


def apply_tab_acks(decisions: Plan, acked: AbstractSet[tuple[int, int]], now: datetime, wait: timedelta) -> None:
    """Push only when offline (seed 004): a push whose notification a tab of the member acked is skipped (reason
    'seen_in_app'); one still within `wait` of its creation is held until then, for the ack to come."""
    keep = []
    for row in decisions.send:
        if not waits_for_tab(row):
            keep.append(row)
        elif (row.user_id, row.notification_id) in acked:
            decisions.skip.append((row, "seen_in_app"))
        elif row.created_at is not None and row.created_at + wait > now:
            decisions.hold.append((row, row.created_at + wait))
        else:
            keep.append(row)
    decisions.send = keep


def require_targets(decisions: Plan, reachable_rows: set[int], reason: str) -> None:
    """Move rows that have nowhere to go (no push subscription: not in reachable_rows) from send to skip,
    or to done when an earlier try reached some of their targets (the rest are gone since)."""
    keep = []
    for row in decisions.send:
        if row.id in reachable_rows:
            keep.append(row)
        elif getattr(row, "reached", None):
            decisions.done.append(row)
        else:
            decisions.skip.append((row, reason))
    decisions.send = keep


def cap_groups(rows: Iterable[BatchRow]) -> dict[tuple[int, str, str], list[BatchRow]]:
    """The rows about to be sent whose type has a frequency cap, by (user, type, channel)."""
    groups: dict[tuple[int, str, str], list[BatchRow]] = {}
    for row in rows:
        if row.cap_count is not None and row.cap_window is not None:
            groups.setdefault((row.user_id, row.type, row.channel), []).append(row)
    return groups


def apply_caps(decisions: Plan, admitted: AbstractSet[int]) -> None:
    """Move capped rows that were not admitted (see service.admit_capped) from send to skip: e-mail with reason
    'digested' (the user's next digest carries it, app/digests), push with reason 'capped'."""
    keep = []
    for row in decisions.send:
        if row.cap_count is None or row.id in admitted:
            keep.append(row)
        else:
            decisions.skip.append((row, "digested" if row.channel == "email" else "capped"))
    decisions.send = keep
