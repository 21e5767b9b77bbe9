"""Counting quotas: one Lua script checks every limit a request falls under, and takes from all of them or none.

A request that creates notifications counts against each subject it belongs to: its API key, and its tenant
when it names one. A subject may have a rate (requests per second with a burst, as GCRA: a token bucket kept as
one timestamp, the "theoretical arrival time") and a daily quota of notifications (per UTC day). The script
checks them all on the Redis server's clock, so web processes on several hosts share one count, and takes from
every one only when all allow it: a refused request uses nothing up. It runs in the realtime store, where the
API's rate limit counts; every quota key carries the hash tag `quotas`, so the script touches one slot of a
Redis Cluster and stays one round trip (the price: the quota keys, a few small ones per subject, share a node).

The API's rate limit (a fixed window per key, app/api/ratelimit.py) can ride along: take_counting() hits its
windows first, in the same script, and takes nothing from the quotas once a window is over, so a request that
creates notifications pays one round trip for every limit it falls under. Its windows' keys are Flask-Limiter's
own; they carry no hash tag, so on a Redis Cluster the API's limit is counted apart (two round trips).

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

# KEYS: the API limit's fixed windows, then per subject its GCRA time and its day's count. ARGV: the number of
# windows, per window its seconds and its size, per subject interval ms, tolerance ms, burst, daily quota (-1:
# none), cost (notifications), and last the day key's TTL. Answer: {ok, windows hit, per window hit its count and
# ms left}, then when allowed (ok 1) per subject requests left in the burst and notifications left today (-1:
# unlimited); refused by a subject (ok 0): its index, kind, limit, remaining, reset ms; refused by a window (ok 0,
# its count over its size): nothing more. A window counts every hit, refused or not (as limits' fixed window).
TAKE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local day_left = (86400 - tonumber(t[1]) % 86400) * 1000
local w = tonumber(ARGV[1])
local answer = {1, 0}
for j = 1, w do
  local count = redis.call('INCRBY', KEYS[j], 1)
  if count == 1 then redis.call('EXPIRE', KEYS[j], ARGV[2 * j]) end
  answer[2] = j
  answer[#answer + 1] = count
  answer[#answer + 1] = redis.call('PTTL', KEYS[j])
  if count > tonumber(ARGV[2 * j + 1]) then
    answer[1] = 0
    return answer
  end
end
local k0, a0 = w, 1 + 2 * w
local n = (#KEYS - w) / 2
local tats, counts, lefts = {}, {}, {}
for i = 1, n do
  local a = a0 + (i - 1) * 5
  local interval, tau, burst = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local daily, cost = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  local rate_left, daily_left = -1, -1
  if interval > 0 then
    local tat = math.max(tonumber(redis.call('GET', KEYS[k0 + 2 * i - 1]) or now), now)
    if tat - now > tau then
      answer[1] = 0
      for _, v in ipairs({i, 'rate', burst, 0, math.ceil(tat - tau - now)}) do answer[#answer + 1] = v end
      return answer
    end
    tats[i] = tat + interval
    rate_left = math.floor((tau + interval - (tats[i] - now)) / interval)
  end
  if daily >= 0 then
    local used = tonumber(redis.call('GET', KEYS[k0 + 2 * i]) or '0')
    if used + cost > daily then
      answer[1] = 0
      for _, v in ipairs({i, 'daily', daily, math.max(daily - used, 0), day_left}) do answer[#answer + 1] = v end
      return answer
    end
    counts[i] = cost
    daily_left = daily - used - cost
  end
  lefts[#lefts + 1] = rate_left
  lefts[#lefts + 1] = daily_left
end
for i = 1, n do
  if tats[i] then redis.call('SET', KEYS[k0 + 2 * i - 1], tostring(tats[i]), 'PX', math.ceil(tats[i] - now) + 1000) end
  if counts[i] then
    redis.call('INCRBY', KEYS[k0 + 2 * i], counts[i])
    redis.call('EXPIRE', KEYS[k0 + 2 * i], tonumber(ARGV[#ARGV]))
  end
end
for _, v in ipairs(lefts) do answer[#answer + 1] = v end
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


@dataclass(frozen=True)
class Window:
    """A fixed window of the API's rate limit counted in the same round trip: its Redis key, length and size."""

    key: str
    seconds: int
    size: int


@dataclass(frozen=True)
class WindowHit:
    """One hit of a window: the window's count with it, and when the window ends (epoch seconds)."""

    window: Window
    count: int
    ends_at: float

    @property
    def allowed(self) -> bool:
        """Whether the hit was within the window's size."""
        return self.count <= self.window.size


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
    counted = take_counting((), quotas, cost)
    return counted[1] if counted is not None else _memory.take(quotas, cost)


def take_counting(
    windows: Sequence[Window], quotas: Sequence[Quota], cost: int
) -> tuple[list[WindowHit], Refusal | list[Left] | None] | None:
    """Hit windows, then take from quotas, in one round trip: the windows' hits and the quotas' outcome.

    The outcome is None when a window was over (its hit is the last one; no quota was looked at). None
    altogether while the store is away: nothing was counted (take() then counts the quotas in memory).
    """
    quotas = [quota for quota in quotas if quota.limited]
    if time.monotonic() < _memory.failed_until:
        return None
    now = time.time()
    day = _day(now)
    keys = [window.key for window in windows] + [key for quota in quotas for key in _keys(quota, day)]
    args = [len(windows), *(arg for window in windows for arg in (window.seconds, window.size))]
    args += [arg for quota in quotas for arg in quota.args(cost)] + [DAY_KEY_TTL]
    try:
        client, script = _script()
        answer = script(keys=keys, args=args, client=client)
    except REALTIME_ERRORS:
        log.warning("quotas counted in memory for %ss: the realtime store is unavailable", FALLBACK_SECONDS)
        _memory.failed_until = time.monotonic() + FALLBACK_SECONDS
        return None
    hit_count = int(answer[1])
    hits = [
        WindowHit(window, int(answer[2 + 2 * j]), now + max(int(answer[3 + 2 * j]), 0) / 1000)
        for j, window in enumerate(windows[:hit_count])
    ]
    if hits and not hits[-1].allowed:
        return hits, None
    return hits, _read(quotas, int(answer[0]), answer[2 + 2 * hit_count :])


def _read(quotas: Sequence[Quota], ok: int, answer: list) -> Refusal | list[Left]:
    """The script's answer about the quotas as a Refusal or the list of what is left."""
    if ok == 0:
        index, kind, limit, remaining, reset_ms = answer
        kind = kind.decode() if isinstance(kind, bytes) else kind
        return Refusal(
            quotas[int(index) - 1], kind, int(limit), int(remaining), max(math.ceil(int(reset_ms) / 1000), 1)
        )
    values = [int(v) for v in answer]
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
