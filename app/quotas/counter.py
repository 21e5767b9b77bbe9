"""Counting quotas: one Lua script checks every limit a request falls under, and takes from all of them or none.

A request that creates notifications counts against each subject it belongs to: its API key, and its tenant
when it names one. A subject may have a rate (requests per second with a burst, as GCRA: a token bucket kept as
one timestamp, the "theoretical arrival time") and a daily quota of notifications (per UTC day). The script
checks them all on the Redis server's clock, so web processes on several hosts share one count, and takes from
every one only when all allow it: a refused request uses nothing up. It runs in the realtime store, where the
API's rate limit counts; every quota key carries the hash tag `quotas`, so the script touches one slot of a
Redis Cluster and stays one round trip (the price: the quota keys, a few small ones per subject, share a node).

While the store fails, the count goes on in this process's memory and the store is tried again after
FALLBACK_SECONDS, as the API's rate limit does (app/api/ratelimit.py): each process then allows a whole quota by
itself, the trade Flask-Limiter's in-memory fallback makes too.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from app import keyspace
from app.extensions import REALTIME_ERRORS, redis

log = logging.getLogger(__name__)

FALLBACK_SECONDS = 5.0
DAY_SECONDS = 86400
DAY_KEY_TTL = 2 * DAY_SECONDS  # a day's count outlives its day by a day (clock skew between hosts)
TAG = "quotas"

# KEYS: per subject its GCRA time and its day's count. ARGV: per subject interval ms, tolerance ms, burst, daily
# quota (-1: none), cost (notifications). Refused: {0, subject index, kind, limit, remaining, reset ms}.
# Allowed: {1, then per subject: requests left in the burst, notifications left today (-1: unlimited)}.
TAKE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local day_left = (86400 - tonumber(t[1]) % 86400) * 1000
local n = #KEYS / 2
local tats, counts, answer = {}, {}, {1}
for i = 1, n do
  local a = (i - 1) * 5
  local interval, tau, burst = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local daily, cost = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  local rate_left, daily_left = -1, -1
  if interval > 0 then
    local tat = math.max(tonumber(redis.call('GET', KEYS[2 * i - 1]) or now), now)
    if tat - now > tau then
      return {0, i, 'rate', burst, 0, math.ceil(tat - tau - now)}
    end
    tats[i] = tat + interval
    rate_left = math.floor((tau + interval - (tats[i] - now)) / interval)
  end
  if daily >= 0 then
    local used = tonumber(redis.call('GET', KEYS[2 * i]) or '0')
    if used + cost > daily then
      return {0, i, 'daily', daily, math.max(daily - used, 0), day_left}
    end
    counts[i] = cost
    daily_left = daily - used - cost
  end
  answer[#answer + 1] = rate_left
  answer[#answer + 1] = daily_left
end
for i = 1, n do
  if tats[i] then redis.call('SET', KEYS[2 * i - 1], tostring(tats[i]), 'PX', math.ceil(tats[i] - now) + 1000) end
  if counts[i] then
    redis.call('INCRBY', KEYS[2 * i], counts[i])
    redis.call('EXPIRE', KEYS[2 * i], tonumber(ARGV[#ARGV]))
  end
end
return answer
"""


@dataclass(frozen=True)
class Quota:
    """One subject's limits: requests per second with a burst, notifications per UTC day; None is no limit."""

    subject: str  # key:<id> or tenant:<key>
    rate: float | None = None
    burst: int | None = None
    daily: int | None = None

    @property
    def limited(self) -> bool:
        """Whether any limit applies."""
        return bool(self.rate) or self.daily is not None

    @property
    def bucket(self) -> int:
        """The burst: requests allowed at once (at least one, and the rate's one second when unset)."""
        return max(self.burst or math.ceil(self.rate or 1), 1)

    def args(self, cost: int) -> list:
        """The script's arguments for this subject."""
        interval = 1000.0 / self.rate if self.rate else 0
        daily = self.daily if self.daily is not None else -1
        return [interval, interval * (self.bucket - 1), self.bucket, daily, cost]


@dataclass(frozen=True)
class Refusal:
    """The limit a request went over: whose, which (rate or daily), its size, what is left, when it comes back."""

    quota: Quota
    kind: str
    limit: int
    remaining: int
    reset_seconds: int


@dataclass(frozen=True)
class Left:
    """What an allowed request left of one subject's limits (None where there is no limit)."""

    quota: Quota
    requests: int | None
    notifications: int | None


def _day(now: float) -> str:
    return time.strftime("%Y%m%d", time.gmtime(now))


def _keys(quota: Quota, day: str) -> list[str]:
    return [keyspace.tagged(TAG, quota.subject, "rate"), keyspace.tagged(TAG, quota.subject, "day", day)]


class _Memory:
    """The same counts in this process's memory, while the store is away."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tats: dict[str, float] = {}
        self.used: dict[tuple[str, str], int] = {}
        self.failed_until = 0.0

    def take(self, quotas: Sequence[Quota], cost: int) -> Refusal | list[Left]:
        now = time.time()
        day, day_left = _day(now), DAY_SECONDS - now % DAY_SECONDS
        with self.lock:
            self.used = {k: v for k, v in self.used.items() if k[1] == day}  # yesterday's counts go
            tats, lefts = {}, []
            for quota in quotas:
                interval, tau, burst, daily, _ = quota.args(cost)
                requests = notifications = None
                if interval:
                    tat = max(self.tats.get(quota.subject, now * 1000), now * 1000)
                    if tat - now * 1000 > tau:
                        return Refusal(quota, "rate", burst, 0, math.ceil((tat - tau - now * 1000) / 1000))
                    tats[quota.subject] = tat + interval
                    requests = math.floor((tau + interval - (tat + interval - now * 1000)) / interval)
                if daily >= 0:
                    used = self.used.get((quota.subject, day), 0)
                    if used + cost > daily:
                        return Refusal(quota, "daily", daily, max(daily - used, 0), math.ceil(day_left))
                    notifications = daily - used - cost
                lefts.append(Left(quota, requests, notifications))
            self.tats.update(tats)
            for left in lefts:
                if left.notifications is not None:
                    key = (left.quota.subject, day)
                    self.used[key] = self.used.get(key, 0) + cost
            return lefts

    def refund(self, quotas: Sequence[Quota], cost: int) -> None:
        day = _day(time.time())
        with self.lock:
            for quota in quotas:
                key = (quota.subject, day)
                if quota.daily is not None and key in self.used:
                    self.used[key] = max(self.used[key] - cost, 0)


_memory = _Memory()


def _script():
    """The realtime store's client and the script registered on it (once per client)."""
    client = redis.realtime()
    script = getattr(client, "hato_quota_script", None)
    if script is None:
        script = client.register_script(TAKE_LUA)
        try:
            client.hato_quota_script = script
        except AttributeError:  # a client that takes no attributes registers it each time
            pass
    return client, script


def take(quotas: Sequence[Quota], cost: int) -> Refusal | list[Left]:
    """Count one request of cost notifications against every quota: a Refusal (nothing taken) or what is left."""
    quotas = [quota for quota in quotas if quota.limited]
    if not quotas:
        return []
    if time.monotonic() >= _memory.failed_until:
        day = _day(time.time())
        keys = [key for quota in quotas for key in _keys(quota, day)]
        args = [arg for quota in quotas for arg in quota.args(cost)] + [DAY_KEY_TTL]
        try:
            client, script = _script()
            answer = script(keys=keys, args=args, client=client)
        except REALTIME_ERRORS:
            log.warning("quotas counted in memory for %ss: the realtime store is unavailable", FALLBACK_SECONDS)
            _memory.failed_until = time.monotonic() + FALLBACK_SECONDS
        else:
            return _read(quotas, answer)
    return _memory.take(quotas, cost)


def _read(quotas: Sequence[Quota], answer: list) -> Refusal | list[Left]:
    """The script's answer as a Refusal or the list of what is left."""
    if int(answer[0]) == 0:
        _, index, kind, limit, remaining, reset_ms = answer
        kind = kind.decode() if isinstance(kind, bytes) else kind
        return Refusal(
            quotas[int(index) - 1], kind, int(limit), int(remaining), max(math.ceil(int(reset_ms) / 1000), 1)
        )
    values = [int(v) for v in answer[1:]]
    return [
        Left(quota, None if values[2 * i] < 0 else values[2 * i], None if values[2 * i + 1] < 0 else values[2 * i + 1])
        for i, quota in enumerate(quotas)
    ]


def refund(quotas: Sequence[Quota], cost: int) -> None:
    """Give back the notifications a request took from the daily quotas when its work did not happen."""
    quotas = [quota for quota in quotas if quota.daily is not None]
    if not quotas:
        return
    if time.monotonic() < _memory.failed_until:
        _memory.refund(quotas, cost)
        return
    day = _day(time.time())
    try:
        pipe = redis.realtime().pipeline(transaction=False)
        for quota in quotas:
            pipe.decrby(_keys(quota, day)[1], cost)
        pipe.execute()
    except REALTIME_ERRORS:  # the count stays a little high: safe side
        log.warning("a refused request's notifications were not given back to its daily quota", exc_info=True)
