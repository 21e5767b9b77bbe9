"""A token bucket per provider in Redis, shared by every worker process and thread.

One Lua script refills and takes a token atomically, on the Redis server's own clock, so workers on
several hosts with drifting clocks still share one rate. Rate (tokens per second) and burst (bucket
size) come from PROVIDER_RATE_<NAME> / PROVIDER_BURST_<NAME> (NAME is the provider name upper-cased,
e.g. PROVIDER_RATE_SMTP=50, PROVIDER_BURST_SMTP_FALLBACK=10); a provider without a rate is not
limited. A provider that answers "slow down" (HTTP 429, SMTP 421 with a hint) pauses its bucket for
the time it asked, so every worker holds back, not only the one that was told.

Buckets live in the realtime store (a Redis or a Redis Cluster, app/extensions.py redis.realtime()); a
bucket's two keys share the hash tag of its name (`hato:<ns>:{smtp}:bucket`, the provider's breaker's too).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from app import keyspace
from app.providers.breaker import evalsha_on

# KEYS[1] the bucket hash {tokens, ts}, KEYS[2] the pause key; ARGV rate/s, burst.
# Returns the milliseconds to wait: 0 means a token was taken.
TAKE_LUA = """
local pause = redis.call('PTTL', KEYS[2])
if pause > 0 then return pause end
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
if rate <= 0 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or burst
local ts = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(now - ts, 0) * rate / 1000)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return wait
"""


def config_key(name: str) -> str:
    """The config suffix for a provider name: smtp_fallback → SMTP_FALLBACK."""
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


@dataclass(frozen=True)
class Limit:
    """Tokens per second and bucket size."""

    rate: float
    burst: int


def limit_for(name: str, config: Mapping) -> Limit | None:
    """The configured limit of provider name, or None when it has no rate."""
    rate = float(config.get(f"PROVIDER_RATE_{config_key(name)}") or 0)
    if rate <= 0:
        return None
    burst = int(float(config.get(f"PROVIDER_BURST_{config_key(name)}") or 0)) or max(int(rate), 1)
    return Limit(rate, burst)


class TokenBucket:
    """take() a token for one send; a positive answer is how many seconds until one is due."""

    def __init__(self, client, name: str, limit: Limit | None, config: Mapping | None = None) -> None:
        self.client = client
        self.name = name
        self.limit = limit or Limit(0, 0)  # unlimited: only a provider's own pause holds it back
        # config: whose namespace (app/keyspace.py); the current app's by default.
        self.keys = [
            keyspace.tagged(name, "bucket", config=config),
            keyspace.tagged(name, "bucket", "pause", config=config),
        ]
        self._script = client.register_script(TAKE_LUA)

    def take(self) -> float:
        """Take one token: 0.0 when taken, else the seconds until one is due (nothing is taken)."""
        return self.wait_of(self.take_on(self.client))

    def take_on(self, client):
        """Run take()'s script (on a pipeline: queue it by its hash, see Router); wait_of() reads its answer."""
        if hasattr(client, "execute"):  # a pipeline: no SCRIPT EXISTS round trip (the caller loads on NOSCRIPT)
            return evalsha_on(client, self._script.sha, self.keys, [self.limit.rate, self.limit.burst])
        return self._script(keys=self.keys, args=[self.limit.rate, self.limit.burst], client=client)

    def load_script(self) -> None:
        """Load the script into Redis (after a NOSCRIPT)."""
        self.client.script_load(self._script.script)

    @staticmethod
    def wait_of(answer) -> float:
        """Seconds until a token is due, from take()'s script answer (0.0: taken)."""
        return int(answer) / 1000

    def pause(self, seconds: float) -> None:
        """Hold every worker back for seconds (the provider's Retry-After); never shortens a pause."""
        ms = max(int(seconds * 1000), 1)
        pipe = self.client.pipeline()  # one key: a MULTI on a Redis, one node's pipeline on a cluster
        pipe.set(self.keys[1], "1", px=ms, nx=True)
        pipe.pexpire(self.keys[1], ms, gt=True)
        pipe.execute()
