"""What reached Redis: badge events heard by a stand-in node, and the jobs waiting in each queue."""

from __future__ import annotations

import json
import secrets
import time
from collections import deque

import pytest

from app.extensions import redis
from app.live import registry
from app.live.publish import broadcast_channel
from app.queueing import QUEUE_NAMES, get_queue

# The users the fixture's watch holds a socket for (tests of the unit of work use small made-up ids).
DEFAULT_USERS = (*range(1, 11), 999_999_999)
# Fields the routing adds to a badge message (who, and for the ack: which notifications, when, which trace).
ROUTING_FIELDS = ("users", "n", "t", "tp")


def next_message(pubsub, timeout: float = 2.0):
    """Return the next published message (subscribe confirmations skipped), or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.1)
        if message is not None:
            return message
    return None


def user_event(user_id: int) -> str:
    """Return how next_event names an event for one user (the broadcast is "all")."""
    return f"user:{int(user_id)}"


class RedisWatch:
    """A stand-in node of the realtime tier: it registers sockets for users and hears their routed events."""

    def __init__(self, users=DEFAULT_USERS) -> None:
        self.node_id = f"watch-{secrets.token_hex(4)}"
        self.client = redis.realtime()
        self.sockets: list[tuple[int, str]] = []
        self.pubsub = self.client.pubsub()
        self.pubsub.subscribe(registry.node_channel(self.node_id), broadcast_channel())
        # Wait for both confirmations, so nothing published from here on can be missed.
        confirmed = 0
        while confirmed < 2:
            message = self.pubsub.get_message(timeout=2)
            assert message is not None, "no subscribe confirmation from Redis"
            confirmed += message["type"] == "subscribe"
        self.pubsub.ignore_subscribe_messages = True
        self.heard: deque[tuple[str, dict]] = deque()
        self.watch(*users)

    def watch(self, *user_ids: int) -> None:
        """Hold a socket for these users in the registry, so events for them come here."""
        for user_id in user_ids:
            socket_id, _ = registry.register(self.client, user_id, self.node_id, 1000, 600)
            self.sockets.append((user_id, socket_id))

    def next_message(self, timeout: float = 5.0) -> dict | None:
        """The next raw message on this node's channel or the broadcast one, decoded, or None."""
        message = next_message(self.pubsub, timeout)
        return None if message is None else json.loads(message["data"])

    def next_event(self, timeout: float = 5.0) -> tuple[str, dict] | None:
        """The next badge event as (user_event(id) or "all", payload without the routing fields), or None."""
        if not self.heard:
            message = next_message(self.pubsub, timeout)
            if message is None:
                return None
            payload = json.loads(message["data"])
            plain = {k: v for k, v in payload.items() if k not in ROUTING_FIELDS}
            users = payload.get("users")
            if users is None:
                self.heard.append(("all", plain))
            for user_id in sorted(users or ()):
                self.heard.append((user_event(user_id), plain))
        return self.heard.popleft()

    @staticmethod
    def jobs() -> dict[str, list[tuple]]:
        """Every queue's jobs as (function name, args), in queue order."""
        found = {}
        for name in QUEUE_NAMES:
            queue = get_queue(name)
            found[name] = [(job.func_name, tuple(job.args)) for job in queue.jobs]
        return found

    def close(self) -> None:
        self.pubsub.close()
        for user_id, socket_id in self.sockets:
            registry.unregister(self.client, user_id, socket_id)


@pytest.fixture
def redis_watch(app):
    """A RedisWatch on the test Redis, closed after the test."""
    with app.app_context():
        watch = RedisWatch()
    yield watch
    with app.app_context():
        watch.close()
