"""A circuit breaker per provider, its state in Redis so every worker agrees.

closed → open after BREAKER_FAILURES transient failures within BREAKER_WINDOW_SECONDS; open →
half_open after BREAKER_COOLDOWN_SECONDS, when exactly one caller gets to probe (a probe whose worker
vanished is replaced after BREAKER_PROBE_TIMEOUT_SECONDS); half_open → closed on a success, back to
open on a failure. Each transition is one Lua script (no two workers can both take the probe),
logged, and counted in Redis for /metrics. The clock is an argument, so tests drive it by hand.

A breaker may be scoped to one target origin of a provider (`scope`, e.g. webpush's push service
host:port): its state is its own, it expires once idle (whoever runs an endpoint can mint hosts, so
their breakers must not pile up in Redis), and /metrics counts its transitions under "<name>:origins"
rather than a series per host.

The state lives in the realtime store (app/extensions.py redis.realtime(): a Redis or a Redis Cluster). A
breaker's state hash and failure times share the hash tag of its name (`hato:<ns>:{smtp}:breaker…`), as the
provider's token bucket does (app/providers/ratelimit.py), so each script, and a router's allow-and-take of
one provider, runs on one cluster node.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app import keyspace
from app.config import default_of

log = logging.getLogger(__name__)


def registry_key() -> str:
    """The set of names of every provider that has a breaker."""
    return keyspace.key("breakers")


def transitions_key() -> str:
    """The hash "name|from|to" -> count."""
    return keyspace.key("breaker", "transitions")


def state_key(name: str) -> str:
    """The state hash of one breaker (its failure times: this + ":failures", the same hash tag)."""
    return keyspace.tagged(name, "breaker")


def evalsha_on(pipe, sha: str, keys: list, args: list):
    """Queue EVALSHA on a pipeline, a Redis one or a Redis Cluster one.

    redis-py 6.4's ClusterPipeline blocks its evalsha() method (redis-py issue #2914, lifted in a later
    release), though it routes the command by its keys like any other: a cluster pipeline sends each script to
    the node of its keys' slot. The caller loads the scripts on NOSCRIPT (see Router).
    """
    return pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args)


STATES = ("closed", "open", "half_open")

# KEYS[1] state hash; ARGV now, cooldown, probe timeout. Returns {allowed, retry_at, transition, closed}.
ALLOW_LUA = """
local now = tonumber(ARGV[1])
local state = redis.call('HGET', KEYS[1], 'state') or 'closed'
if state == 'closed' then return {1, '0', '', 1} end
if state == 'open' then
  local ready = tonumber(redis.call('HGET', KEYS[1], 'opened_at') or '0') + tonumber(ARGV[2])
  if now < ready then return {0, tostring(ready), ''} end
  redis.call('HSET', KEYS[1], 'state', 'half_open', 'probe_until', tostring(now + tonumber(ARGV[3])))
  return {1, '0', 'open>half_open'}
end
local probe = tonumber(redis.call('HGET', KEYS[1], 'probe_until') or '0')
if now < probe then return {0, tostring(probe), ''} end
redis.call('HSET', KEYS[1], 'probe_until', tostring(now + tonumber(ARGV[3])))
return {1, '0', ''}
"""

# KEYS[1] state hash, KEYS[2] failure times; ARGV now, window, threshold, unique member.
FAILURE_LUA = """
local now = tonumber(ARGV[1])
local state = redis.call('HGET', KEYS[1], 'state') or 'closed'
if state == 'half_open' then
  redis.call('HSET', KEYS[1], 'state', 'open', 'opened_at', ARGV[1])
  return 'half_open>open'
end
if state == 'open' then return '' end
redis.call('ZADD', KEYS[2], now, ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. tostring(now - tonumber(ARGV[2])))
redis.call('PEXPIRE', KEYS[2], math.ceil(tonumber(ARGV[2]) * 1000) + 1000)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'state', 'open', 'opened_at', ARGV[1])
  redis.call('DEL', KEYS[2])
  return 'closed>open'
end
return ''
"""

# KEYS[1] state hash, KEYS[2] failure times. Returns the transition, if any.
SUCCESS_LUA = """
local state = redis.call('HGET', KEYS[1], 'state') or 'closed'
if state == 'closed' then return '' end
redis.call('HSET', KEYS[1], 'state', 'closed')
redis.call('HDEL', KEYS[1], 'opened_at', 'probe_until')
redis.call('DEL', KEYS[2])
return state .. '>closed'
"""


@dataclass(frozen=True)
class Settings:
    """When a breaker opens and how long it stays open."""

    failures: int = default_of("BREAKER_FAILURES")
    window: float = default_of("BREAKER_WINDOW_SECONDS")
    cooldown: float = default_of("BREAKER_COOLDOWN_SECONDS")
    probe_timeout: float = default_of("BREAKER_PROBE_TIMEOUT_SECONDS")

    @classmethod
    def from_config(cls, config: Mapping) -> Settings:
        """Read BREAKER_FAILURES / BREAKER_WINDOW_SECONDS / BREAKER_COOLDOWN_SECONDS / BREAKER_PROBE_TIMEOUT_SECONDS."""
        return cls(
            int(config["BREAKER_FAILURES"]),
            float(config["BREAKER_WINDOW_SECONDS"]),
            float(config["BREAKER_COOLDOWN_SECONDS"]),
            float(config["BREAKER_PROBE_TIMEOUT_SECONDS"]),
        )


@dataclass(frozen=True)
class Permit:
    """Whether a caller may use the provider now, and if not, when to ask again (epoch seconds); closed: the
    breaker was closed (not a half-open probe)."""

    allowed: bool
    retry_at: float = 0.0
    closed: bool = False


class CircuitBreaker:
    """allow() before a send; success() / failure() after it."""

    def __init__(
        self, client, name: str, settings: Settings, clock: Callable[[], float] = time.time, scope: str | None = None
    ) -> None:
        self.client = client
        self.name = name
        self.scope = scope
        self.settings = settings
        self.clock = clock
        label = name if scope is None else f"{name}:{scope}"
        self.keys = [state_key(label), state_key(label) + ":failures"]
        self._allow = client.register_script(ALLOW_LUA)
        self._failure = client.register_script(FAILURE_LUA)
        self._success = client.register_script(SUCCESS_LUA)

    def state(self) -> str:
        """closed | open | half_open."""
        value = self.client.hget(self.keys[0], "state")
        return value.decode() if isinstance(value, bytes) else (value or "closed")

    def allow(self) -> Permit:
        """May we send now? Moving open → half_open hands this caller the single probe."""
        return self.permit(self.allow_on(self.client))

    def allow_on(self, client):
        """Run allow()'s script (on a pipeline: queue it by its hash, see Router); permit() reads its answer."""
        s = self.settings
        args = [self.clock(), s.cooldown, s.probe_timeout]
        if hasattr(client, "execute"):  # a pipeline: no SCRIPT EXISTS round trip (the caller loads on NOSCRIPT)
            return evalsha_on(client, self._allow.sha, self.keys[:1], args)
        return self._allow(keys=self.keys[:1], args=args, client=client)

    def permit(self, answer) -> Permit:
        """The Permit in allow()'s script answer (logging a transition)."""
        allowed, retry_at, transition, *closed = answer
        self._note(transition)
        return Permit(bool(allowed), float(retry_at), bool(closed and closed[0]))

    def failure(self) -> None:
        """Count one transient failure (it may open the breaker)."""
        s = self.settings
        self._note(self._failure(keys=self.keys, args=[self.clock(), s.window, s.failures, uuid.uuid4().hex]))

    def success(self) -> None:
        """A send worked: an open or half-open breaker closes."""
        self.noted(self.success_on(self.client))

    def success_on(self, client):
        """Run success()'s script (on a pipeline: by its hash, as allow_on); noted() reads its answer."""
        if hasattr(client, "execute"):
            return evalsha_on(client, self._success.sha, self.keys, [])
        return self._success(keys=self.keys, client=client)

    def load_scripts(self) -> None:
        """Load the scripts into Redis (after a NOSCRIPT: a restarted or flushed server, or a replica just
        promoted to master, which a SCRIPT LOAD never reached; on a cluster SCRIPT LOAD goes to every master)."""
        for script in (self._allow, self._failure, self._success):
            self.client.script_load(script.script)

    def noted(self, transition) -> None:
        """Log and count the transition a script answered (empty: none)."""
        self._note(transition)

    def _note(self, transition) -> None:
        transition = transition.decode() if isinstance(transition, bytes) else (transition or "")
        if not transition:
            return
        before, after = transition.split(">")
        who = self.name if self.scope is None else f"{self.name} for {self.scope!r}"
        log.warning("circuit breaker %s: %s -> %s", who, before, after)
        pipe = self.client.pipeline(transaction=False)  # counters on other slots than the state: no MULTI
        if self.scope is None:
            pipe.sadd(registry_key(), self.name)
            pipe.hincrby(transitions_key(), f"{self.name}|{before}|{after}", 1)
        else:
            s = self.settings
            # Outlives an open + probe cycle (refreshed on every transition), then a closed scope leaves no key.
            pipe.pexpire(self.keys[0], int((2 * (s.cooldown + s.probe_timeout) + s.window) * 1000) + 1000)
            pipe.hincrby(transitions_key(), f"{self.name}:origins|{before}|{after}", 1)
        pipe.execute()


def snapshot(client) -> tuple[dict[str, str], dict[tuple[str, str, str], int]]:
    """Every known breaker's state and the transition counts, for /metrics."""
    names = sorted(n.decode() if isinstance(n, bytes) else n for n in client.smembers(registry_key()))
    pipe = client.pipeline(transaction=False)  # one round trip (per node, side by side, on a cluster)
    for name in names:
        pipe.hget(state_key(name), "state")
    states = {}
    for name, value in zip(names, pipe.execute() if names else [], strict=True):
        states[name] = (value.decode() if isinstance(value, bytes) else value) or "closed"
    counts = {}
    for field, value in client.hgetall(transitions_key()).items():
        field = field.decode() if isinstance(field, bytes) else field
        counts[tuple(field.split("|"))] = int(value)
    return states, counts
