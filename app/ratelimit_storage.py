"""Rate-limit storage: Redis, with the counter's expiry read in the same round trip as the hit.

Flask-Limiter answers every limited request with RateLimit-* headers. With the stock Redis storage
that costs three round trips per request (the hit, then GET and TTL for the headers): about a
millisecond of a one-recipient ingest. Here the hit's Lua script also returns the key's PTTL, and
the headers read what this thread's last hit on that key returned, if it was just now. The counting
itself is the stock fixed-window script, so limits mean exactly what they did.
"""

from __future__ import annotations

import threading
import time

from limits.storage import RedisStorage

SCHEME_PREFIX = "hato+"
# How long a hit's answer may stand in for a read of the same key: within one request only.
FRESH_SECONDS = 1.0

INCR_EXPIRE_PTTL = """
local amount = tonumber(ARGV[2])
local current = redis.call("incrby", KEYS[1], amount)
if tonumber(current) == amount then
    redis.call("expire", KEYS[1], ARGV[1])
end
return {current, redis.call("pttl", KEYS[1])}
"""


class HitAwareRedisStorage(RedisStorage):
    """RedisStorage (`hato+redis://`, `hato+redis+unix://`) whose reads after a hit need no round trip."""

    STORAGE_SCHEME = [SCHEME_PREFIX + "redis", SCHEME_PREFIX + "rediss", SCHEME_PREFIX + "redis+unix"]

    def __init__(self, uri: str, **options) -> None:
        self._last_hit = threading.local()
        super().__init__(uri.removeprefix(SCHEME_PREFIX), **options)

    def initialize_storage(self, uri: str) -> None:
        """Register the stock scripts and the hit-with-expiry one."""
        super().initialize_storage(uri)
        self.lua_incr_expire_pttl = self.get_connection().register_script(INCR_EXPIRE_PTTL)

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Count a hit; remember the new count and when the window ends for this thread's next reads."""
        current, pttl = self.lua_incr_expire_pttl([self.prefixed_key(key)], [expiry, amount])
        now = time.time()
        self._last_hit.value = (key, int(current), now + max(int(pttl), 0) / 1000, time.monotonic())
        return int(current)

    def _recent_hit(self, key: str) -> tuple | None:
        last = getattr(self._last_hit, "value", None)
        if last is not None and last[0] == key and time.monotonic() - last[3] < FRESH_SECONDS:
            return last
        return None

    def get(self, key: str) -> int:
        """The counter, from this thread's hit just now if there was one."""
        recent = self._recent_hit(key)
        return recent[1] if recent is not None else super().get(key)

    def get_expiry(self, key: str) -> float:
        """When the window ends (epoch seconds), from this thread's hit just now if there was one."""
        recent = self._recent_hit(key)
        return recent[2] if recent is not None else super().get_expiry(key)

    def clear(self, key: str) -> None:
        """Reset the counter (and forget this thread's hit on it)."""
        self._last_hit.value = None
        super().clear(key)

    def reset(self) -> int | None:
        """Clear every limit (and forget this thread's last hit)."""
        self._last_hit.value = None
        return super().reset()
