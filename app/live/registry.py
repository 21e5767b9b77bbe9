"""The connection registry (seed 004): which web process (node) holds each user's open sockets.

One sorted set per user (keyspace.tagged("u<id>", "sockets")), a member per socket:
"<open time in µs, zero-padded>:<random>@<node id>". Sorting members sorts by open time (the cap evicts the
oldest); the node id after "@" is where a badge event for that user must go; the score is the holding
process's last heartbeat, so the sockets of a process that died without saying so age out after the TTL
instead of drawing events (and counting against the user's cap) forever. A second key with the same hash
tag (one Redis Cluster slot, so one script touches both) keeps each socket's device and open time.

Register and evict run as one Lua script on the Redis clock: atomic across processes, no skew between
hosts. Heartbeats read Redis's clock once per pass and refresh every socket of the node in one pipeline.
Lookups (nodes_of) take one pipelined round trip per batch of users (per shard on a cluster).

Nodes themselves are listed in one more sorted set (node id -> last heartbeat), with each node's counters
(app/realtime/stats.py), so /metrics finds every live process's figures.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping

import redis as redis_lib

from app import keyspace

# KEYS[1] the user's set, KEYS[2] its socket details; ARGV token, max, ttl, details. Returns {member, evicted...}.
REGISTER_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local ttl = tonumber(ARGV[3])
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - ttl))
for i = 1, #gone do redis.call('HDEL', KEYS[2], gone[i]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - ttl))
local member = string.format('%016.0f', tonumber(t[1]) * 1000000 + tonumber(t[2])) .. ':' .. ARGV[1]
redis.call('ZADD', KEYS[1], now, member)
redis.call('HSET', KEYS[2], member, ARGV[4])
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
local excess = #members - tonumber(ARGV[2])
local result = {member}
if excess > 0 then
  table.sort(members)
  for i = 1, excess do
    redis.call('ZREM', KEYS[1], members[i])
    redis.call('HDEL', KEYS[2], members[i])
    result[#result + 1] = members[i]
  end
end
redis.call('EXPIRE', KEYS[1], math.ceil(ttl) + 1)
redis.call('EXPIRE', KEYS[2], math.ceil(ttl) + 1)
return result
"""

PIPELINE_CHUNK = 1000
DEVICE_MAX_CHARS = 64


def sockets_key(user_id: int, config: Mapping | None = None) -> str:
    """Return the key of one user's open sockets (member -> last heartbeat)."""
    return keyspace.tagged(f"u{int(user_id)}", "sockets", config=config)


def details_key(user_id: int, config: Mapping | None = None) -> str:
    """Return the key of one user's socket details (member -> JSON: device, node)."""
    return keyspace.tagged(f"u{int(user_id)}", "socket-details", config=config)


def nodes_key(config: Mapping | None = None) -> str:
    """Return the sorted set of live node ids -> last heartbeat (epoch seconds)."""
    return keyspace.key("realtime", "nodes", config=config)


def node_channel(node_id: str, config: Mapping | None = None) -> str:
    """Return the pub/sub channel one node (web process) listens on for its own users' events."""
    return keyspace.key("realtime", "node", node_id, config=config)


def node_of(member: str) -> str | None:
    """Return the node id a registry member names (None for a malformed one)."""
    _, at, node = member.rpartition("@")
    return node if at and node else None


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def register(
    client: redis_lib.Redis,
    user_id: int,
    node_id: str,
    max_per_user: int,
    ttl: float,
    device: str | None = None,
    config: Mapping | None = None,
) -> tuple[str, list[str]]:
    """Register a new socket of user_id on node_id; return its id and the oldest ones it pushed over the cap.

    Raises RedisError (the caller then falls back to a per-process cap).
    """
    details = json.dumps({"node": node_id, "device": (device or "")[:DEVICE_MAX_CHARS]}, separators=(",", ":"))
    script = client.register_script(REGISTER_LUA)
    keys = [sockets_key(user_id, config), details_key(user_id, config)]
    token = f"{secrets.token_hex(6)}@{node_id}"
    result = script(keys=keys, args=[token, int(max_per_user), float(ttl), details])
    ids = [_text(item) for item in result]
    return ids[0], ids[1:]


def heartbeat(
    client: redis_lib.Redis,
    node_id: str,
    members: dict[int, Iterable[str]],
    ttl: float,
    config: Mapping | None = None,
) -> None:
    """Mark this node and its sockets (user id -> socket ids) as alive, on Redis's clock; raises RedisError.

    Re-adds a socket a long Redis outage (or a failover to a replica that had not seen it) let age out.
    """
    seconds, micros = client.time()
    now = seconds + micros / 1_000_000
    expire = int(ttl) + 1
    users = list(members.items())
    with client.pipeline(transaction=False) as pipe:
        pipe.zadd(nodes_key(config), {node_id: now})
        pipe.zremrangebyscore(nodes_key(config), "-inf", f"({now - ttl}")
        pipe.execute()
    for start in range(0, len(users), PIPELINE_CHUNK):
        with client.pipeline(transaction=False) as pipe:
            for user_id, socket_ids in users[start : start + PIPELINE_CHUNK]:
                key = sockets_key(user_id, config)
                pipe.zadd(key, dict.fromkeys(socket_ids, now))
                pipe.zremrangebyscore(key, "-inf", f"({now - ttl}")
                pipe.expire(key, expire)
                pipe.expire(details_key(user_id, config), expire)
            pipe.execute()


def unregister(client: redis_lib.Redis, user_id: int, socket_id: str, config: Mapping | None = None) -> None:
    """Forget a closed socket; raises RedisError (it then ages out)."""
    with client.pipeline(transaction=False) as pipe:
        pipe.zrem(sockets_key(user_id, config), socket_id)
        pipe.hdel(details_key(user_id, config), socket_id)
        pipe.execute()


def leave(client: redis_lib.Redis, node_id: str, config: Mapping | None = None) -> None:
    """Take a node off the list when its process stops; raises RedisError."""
    client.zrem(nodes_key(config), node_id)


def open_socket_ids(client: redis_lib.Redis, user_id: int, config: Mapping | None = None) -> list[str]:
    """Return the ids of user_id's registered sockets, oldest first."""
    return sorted(_text(member) for member in client.zrange(sockets_key(user_id, config), 0, -1))


def socket_details(client: redis_lib.Redis, user_id: int, config: Mapping | None = None) -> dict[str, dict]:
    """Return socket id -> {"node", "device"} for user_id's registered sockets."""
    raw = client.hgetall(details_key(user_id, config))
    return {_text(member): json.loads(_text(value)) for member, value in raw.items()}


def nodes_of(client: redis_lib.Redis, user_ids: Iterable[int], config: Mapping | None = None) -> dict[str, list[int]]:
    """Return node id -> the users of user_ids with a socket there; users with none are left out.

    One pipelined round trip per PIPELINE_CHUNK users (per shard on a cluster); raises RedisError.
    """
    ids = sorted({int(user_id) for user_id in user_ids})
    routes: dict[str, list[int]] = {}
    for start in range(0, len(ids), PIPELINE_CHUNK):
        chunk = ids[start : start + PIPELINE_CHUNK]
        with client.pipeline(transaction=False) as pipe:
            for user_id in chunk:
                pipe.zrange(sockets_key(user_id, config), 0, -1)
            replies = pipe.execute()
        for user_id, members in zip(chunk, replies, strict=True):
            for node in {node_of(_text(member)) for member in members} - {None}:
                routes.setdefault(node, []).append(user_id)
    return routes


def live_nodes(client: redis_lib.Redis, ttl: float, config: Mapping | None = None) -> list[str]:
    """Return the node ids that sent a heartbeat within ttl (Redis's clock); raises RedisError."""
    seconds, micros = client.time()
    now = seconds + micros / 1_000_000
    return [_text(node) for node in client.zrangebyscore(nodes_key(config), now - ttl, "+inf")]
