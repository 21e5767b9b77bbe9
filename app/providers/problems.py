"""What a provider said about this installation's configuration (not about one message), for the dashboard.

A worker notes it in Redis when, say, FCM answers SENDER_ID_MISMATCH: every web process's dashboard then
says the configuration is wrong, until a send through that provider works again or a day has passed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from redis.exceptions import RedisError

from app import keyspace
from app.extensions import redis

log = logging.getLogger(__name__)

PROBLEM_TTL_SECONDS = 24 * 3600


@dataclass(frozen=True)
class Problem:
    """The provider's last word on the configuration, and when (epoch seconds)."""

    provider: str
    text: str
    at: float

    @property
    def when(self) -> datetime:
        """at as an aware datetime."""
        return datetime.fromtimestamp(self.at, UTC)


def _key(provider: str) -> str:
    return keyspace.key("provider-problem", provider)


def note(provider: str, text: str) -> None:
    """Keep what the provider said about the configuration (best effort: the log has it too)."""
    try:
        redis.client().set(_key(provider), json.dumps({"text": text[:500], "at": time.time()}), ex=PROBLEM_TTL_SECONDS)
    except (RedisError, RuntimeError) as exc:  # RuntimeError: no app context (a provider used on its own)
        log.warning("could not keep %s's configuration problem: %s", provider, exc)


def clear(provider: str) -> None:
    """The provider works again: the dashboard stops saying otherwise."""
    try:
        redis.client().delete(_key(provider))
    except (RedisError, RuntimeError) as exc:
        log.warning("could not clear %s's configuration problem: %s", provider, exc)


def current(providers: list[str]) -> list[Problem]:
    """The problems kept for these providers, in their order (none when Redis does not answer)."""
    try:
        values = redis.client().mget([_key(name) for name in providers]) if providers else []
    except RedisError:
        return []
    found = []
    for name, value in zip(providers, values, strict=True):
        if value:
            data = json.loads(value)
            found.append(Problem(name, str(data.get("text", "")), float(data.get("at", 0))))
    return found


class Noted:
    """One provider's problem as this process told the dashboard: a send that works clears it, without a Redis
    round trip per send while nothing was noted."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self._told = threading.Event()

    def note(self, text: str) -> None:
        """Tell every process's dashboard what the provider said about the configuration."""
        self._told.set()
        note(self.provider, text)

    def solved(self) -> None:
        """A send worked: the dashboard stops showing what this process noted."""
        if self._told.is_set():
            self._told.clear()
            clear(self.provider)
