"""What reached Redis: badge events heard by a real subscriber, and the jobs waiting in each queue."""

from __future__ import annotations

import json
import time

import pytest

from app.extensions import redis
from app.live.publish import broadcast_channel, user_channel
from app.queueing import QUEUE_NAMES, get_queue


def next_message(pubsub, timeout: float = 2.0):
    """Return the next published message (subscribe confirmations skipped), or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.1)
        if message is not None:
            return message
    return None


class RedisWatch:
    """A subscriber to every badge channel, and a reader of the RQ queues."""

    def __init__(self) -> None:
        self.pubsub = redis.client().pubsub()
        self.pubsub.psubscribe(user_channel("*"))
        self.pubsub.subscribe(broadcast_channel())
        # Wait for both confirmations, so nothing published from here on can be missed.
        confirmed = 0
        while confirmed < 2:
            message = self.pubsub.get_message(timeout=2)
            assert message is not None, "no subscribe confirmation from Redis"
            confirmed += message["type"] in ("subscribe", "psubscribe")
        self.pubsub.ignore_subscribe_messages = True

    def next_event(self, timeout: float = 5.0) -> tuple[str, dict] | None:
        """The next badge event as (channel, payload), or None."""
        message = next_message(self.pubsub, timeout)
        if message is None:
            return None
        channel = message["channel"].decode() if isinstance(message["channel"], bytes) else message["channel"]
        return channel, json.loads(message["data"])

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


@pytest.fixture
def redis_watch(app):
    """A RedisWatch on the test Redis, closed after the test."""
    with app.app_context():
        watch = RedisWatch()
    yield watch
    watch.close()
