"""Failover routing: a channel's providers in order, each behind its circuit breaker and token bucket.

route() answers which provider sends the next message: the first whose breaker lets us through,
once its bucket gives a token. A short wait for a token (up to RATE_LIMIT_MAX_WAIT_SECONDS) is slept
here; a longer one, or every breaker open, comes back as "wait until": the engine then returns the
rows to pending for that time without counting an attempt. If Redis does not answer, routing fails
open (first provider, unlimited) and says so in the log: the ledger still guards every row.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass

from redis.exceptions import RedisError

from app.providers import Provider
from app.providers.breaker import CircuitBreaker, Permit, Settings
from app.providers.ratelimit import TokenBucket, limit_for

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Route:
    """Send with provider now; or, with provider None, come back at wait_until (epoch seconds),
    spacing further rows by `spacing` seconds (one token interval) so they don't return all at once."""

    provider: Provider | None
    wait_until: float = 0.0
    spacing: float = 0.0


class Router:
    """The providers of one channel for one batch; `with router:` opens each provider on first use."""

    def __init__(
        self,
        providers: list[Provider],
        config: Mapping,
        client,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.providers = providers
        self.clock = clock
        self.sleep = sleep
        self.max_wait = float(config.get("RATE_LIMIT_MAX_WAIT_SECONDS", 1.0))
        settings = Settings.from_config(config)
        self.breakers = {p.name: CircuitBreaker(client, p.name, settings, clock) for p in providers}
        self.buckets = {p.name: TokenBucket(client, p.name, limit_for(p.name, config)) for p in providers}
        self._stack = ExitStack()
        self._open: set[str] = set()

    def __enter__(self) -> Router:
        return self

    def __exit__(self, *exc_info) -> None:
        self._stack.close()

    def route(self) -> Route:
        """Pick the provider for the next send and take its token (see the module docstring)."""
        retry_at: list[float] = []
        for provider in self.providers:
            permit = self._guard(self.breakers[provider.name].allow, Permit(True))
            if not permit.allowed:
                retry_at.append(permit.retry_at)
                continue
            bucket = self.buckets[provider.name]
            wait = self._guard(bucket.take, 0.0)
            while 0 < wait <= self.max_wait:
                self.sleep(wait)
                wait = self._guard(bucket.take, 0.0)
            if wait > 0:
                spacing = 1 / bucket.limit.rate if bucket.limit.rate else 0.0
                return Route(None, self.clock() + wait, spacing)
            return Route(self._enter(provider))
        return Route(None, min(retry_at))

    def report(self, provider: Provider, outcome: str, retry_after: float | None = None) -> None:
        """Tell the breaker and bucket how a send went (outcome sent | transient | permanent)."""
        breaker = self.breakers[provider.name]
        if outcome == "sent":
            self._guard(breaker.success, None)
        elif retry_after:
            # "Slow down" is not an outage: pause the bucket for everyone, leave the breaker alone.
            self._guard(lambda: self.buckets[provider.name].pause(retry_after), None)
        elif outcome == "transient":
            self._guard(breaker.failure, None)

    def _enter(self, provider: Provider) -> Provider:
        if provider.name not in self._open:
            self._stack.enter_context(provider)
            self._open.add(provider.name)
        return provider

    @staticmethod
    def _guard(call, default):
        try:
            return call()
        except RedisError as exc:
            log.warning("rate limit / circuit breaker state unavailable (%s); sending without it", exc)
            return default
