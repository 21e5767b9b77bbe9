"""Open websockets per user across web processes: one Redis sorted set per user, capped, oldest evicted.

A member is "<open time in µs, zero-padded>:<random>", so sorting members sorts by open time; its
score is the holding process's last heartbeat (Redis server time), so the sockets of a process that
died without saying so age out after the TTL instead of counting against the user forever.
Register, heartbeat and evict run as Lua scripts on the Redis clock: atomic across processes, and
no skew between hosts. The caller closes what register() evicted (app/live/publish.py close_sockets).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping

import redis as redis_lib

from app import keyspace

# KEYS[1] the user's set; ARGV token, max, ttl. Returns {member, evicted...}.
REGISTER_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - ttl))
local member = string.format('%016.0f', tonumber(t[1]) * 1000000 + tonumber(t[2])) .. ':' .. ARGV[1]
redis.call('ZADD', KEYS[1], now, member)
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
local excess = #members - tonumber(ARGV[2])
local result = {member}
if excess > 0 then
  table.sort(members)
  for i = 1, excess do
    redis.call('ZREM', KEYS[1], members[i])
    result[#result + 1] = members[i]
  end
end
redis.call('EXPIRE', KEYS[1], math.ceil(ttl) + 1)
return result
"""

# KEYS[1] the user's set; ARGV ttl, members. Re-adds a member a long Redis outage let age out.
HEARTBEAT_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], now, ARGV[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - ttl))
redis.call('EXPIRE', KEYS[1], math.ceil(ttl) + 1)
return 1
"""


def sockets_key(user_id: int, config: Mapping | None = None) -> str:
    """Return the Redis key of one user's open sockets."""
    return keyspace.key("sockets", "user", int(user_id), config=config)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def register(
    client: redis_lib.Redis, user_id: int, max_per_user: int, ttl: float, config: Mapping | None = None
) -> tuple[str, list[str]]:
    """Count a new socket of user_id; return its id and the ids of the oldest sockets it pushed over the cap.

    Raises RedisError (the caller then falls back to a per-process cap).
    """
    script = client.register_script(REGISTER_LUA)
    key = sockets_key(user_id, config)
    result = script(keys=[key], args=[secrets.token_hex(6), int(max_per_user), float(ttl)])
    ids = [_text(item) for item in result]
    return ids[0], ids[1:]


def heartbeat(
    client: redis_lib.Redis, members: dict[int, Iterable[str]], ttl: float, config: Mapping | None = None
) -> None:
    """Mark these sockets (user id -> socket ids) as still held; raises RedisError."""
    script = client.register_script(HEARTBEAT_LUA)
    with client.pipeline(transaction=False) as pipe:
        for user_id, socket_ids in members.items():
            script(keys=[sockets_key(user_id, config)], args=[float(ttl), *socket_ids], client=pipe)
        pipe.execute()


def unregister(client: redis_lib.Redis, user_id: int, socket_id: str, config: Mapping | None = None) -> None:
    """Forget a closed socket; raises RedisError (it then ages out)."""
    client.zrem(sockets_key(user_id, config), socket_id)


def open_socket_ids(client: redis_lib.Redis, user_id: int, config: Mapping | None = None) -> list[str]:
    """Return the ids of user_id's counted sockets, oldest first."""
    return sorted(_text(member) for member in client.zrange(sockets_key(user_id, config), 0, -1))
