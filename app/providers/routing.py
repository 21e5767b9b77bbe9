"""Failover routing: a channel's providers in order, each behind its circuit breaker and token bucket.

route() answers which provider sends the next message: the first whose breaker lets us through,
once its bucket gives a token. A short wait for a token (up to RATE_LIMIT_MAX_WAIT_SECONDS) is slept
here; a longer one, or every breaker open, comes back as "wait until": the engine then returns the
rows to pending for that time without counting an attempt. If Redis does not answer, routing fails
open (first provider, unlimited) and says so in the log: the ledger still guards every row. A provider
with no rate whose breaker was closed at the last look is routed to without asking Redis again for
ROUTE_RECHECK_SECONDS (a failure this router sees asks at once): another worker's failures reach it
within that, as they would between two batches.

A provider that sends one message to several targets run by different parties (Web Push: each
subscription's push service) names each target's scope (`scope_of`, host:port). Each scope has its
own Gate, a pause and a breaker: admit() drops the targets whose scope is paused or open (the row
comes back for them when it may), and each target's answer is reported to its own scope only. So a
member's endpoint that answers 429 with a ten-year Retry-After, or fails on purpose, holds back only
that endpoint's push service, for at most RETRY_CAP_SECONDS, and never opens the provider's breaker
for everyone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial

from redis.exceptions import NoScriptError

from app.extensions import REALTIME_ERRORS
from app.providers import Provider, TargetOutcome
from app.providers.breaker import CircuitBreaker, Permit, Settings
from app.providers.ratelimit import TokenBucket, limit_for

log = logging.getLogger(__name__)

# How long a provider without a rate, whose breaker was closed at the last look, is routed to without asking
# Redis (a Redis round trip per message was most of a webhook's cost in the engine).
ROUTE_RECHECK_SECONDS = 1.0


@dataclass(frozen=True)
class Route:
    """Send with provider now; or, with provider None, come back at wait_until (epoch seconds),
    spacing further rows by `spacing` seconds (one token interval) so they don't return all at once."""

    provider: Provider | None
    wait_until: float = 0.0
    spacing: float = 0.0


class Gate:
    """The pause and circuit breaker of one scope of a provider (Web Push: one push service, host:port)."""

    def __init__(self, client, provider: str, scope: str, settings: Settings, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.breaker = CircuitBreaker(client, provider, settings, clock, scope=scope)
        # No rate of its own (the provider's bucket paces the channel): it only carries the scope's pause.
        self.bucket = TokenBucket(client, f"{provider}:{scope}", None)

    def held_until(self) -> float:
        """0.0 when the scope may be sent to now, else when to ask again (epoch seconds)."""
        wait = self.bucket.take()  # the pause first: an open breaker's probe is not spent on a paused scope
        if wait > 0:
            return self.clock() + wait
        permit = self.breaker.allow()
        return 0.0 if permit.allowed else permit.retry_at


class Router:
    """The providers of one channel for one batch; `with router:` opens each provider on first use."""

    def __init__(
        self,
        providers: list[Provider],
        config: Mapping,
        client,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        paused_parts: Mapping[str, float] | None = None,
    ) -> None:
        self.providers = providers
        self.config = config
        # Parts of a provider (APNs in push) an operator paused -> until when their targets wait (epoch seconds).
        self.paused_parts = dict(paused_parts or {})
        self.clock = clock
        self.sleep = sleep
        self.max_wait = float(config["RATE_LIMIT_MAX_WAIT_SECONDS"])
        # No pause lasts longer than the longest retry delay, whatever a provider's Retry-After says.
        self.cap = float(config["RETRY_CAP_SECONDS"])
        self.client = client
        self.settings = settings = Settings.from_config(config)
        self._gates: dict[tuple[str, str], Gate] = {}
        # scope -> the provider (or part of one: apns within push) whose gate it is, as admit() saw it.
        self._scope_owner: dict[str, str] = {}
        # The token buckets of a provider's parts (PROVIDER_RATE_APNS for the APNs part of push), made on first use.
        self._part_buckets: dict[str, TokenBucket] = {}
        # (owner, scope) -> until when (the router's clock) a scope found open is not asked again; and the scopes
        # asked just now, whose next success is reported (it may be a half-open breaker's probe).
        self._scope_clear_until: dict[tuple[str, str], float] = {}
        self._scope_fresh: set[tuple[str, str]] = set()
        self.breakers = {p.name: CircuitBreaker(client, p.name, settings, clock) for p in providers}
        self.buckets = {p.name: TokenBucket(client, p.name, limit_for(p.name, config)) for p in providers}
        self._stack = ExitStack()
        self._open: set[str] = set()
        # Providers whose breaker is owed a success() (see report()): sent with the next route().
        self._owed: list[str] = []
        # Provider name -> until when (the router's clock) it may be routed to without asking Redis.
        self._clear_until: dict[str, float] = {}

    def __enter__(self) -> Router:
        return self

    def __exit__(self, *exc_info) -> None:
        try:
            self.guard(self._pay_owed, None)
        finally:
            self._stack.close()

    def route(self) -> Route:
        """Pick the provider for the next send and take its token (see the module docstring)."""
        retry_at: list[float] = []
        for provider in self.providers:
            if self._clear_until.get(provider.name, 0.0) > self.clock():
                return Route(self._enter(provider))
            bucket = self.buckets[provider.name]
            permit, wait = self.guard(partial(self._allow_and_take, provider.name), (Permit(True), 0.0))
            if permit.closed and not bucket.limit.rate and wait == 0:
                self._clear_until[provider.name] = self.clock() + ROUTE_RECHECK_SECONDS
            if not permit.allowed:
                retry_at.append(permit.retry_at)
                continue
            while 0 < wait <= self.max_wait:
                self.sleep(wait)
                wait = self.guard(bucket.take, 0.0)
            if wait > 0:
                spacing = 1 / bucket.limit.rate if bucket.limit.rate else 0.0
                return Route(None, self.clock() + wait, spacing)
            return Route(self._enter(provider))
        return Route(None, min(retry_at))

    def admit(self, provider: Provider, targets: tuple) -> tuple[tuple, float]:
        """The targets whose scope may be sent to now, and, when some are held, the earliest time one
        of them may be tried again (at most RETRY_CAP_SECONDS ahead, or the pause's end for a part an operator
        paused; 0.0 when none is held)."""
        scope_of = getattr(provider, "scope_of", None)
        if scope_of is None:
            return targets, 0.0
        part_of = getattr(provider, "part_of", None)
        verdicts: dict[str, float] = {}  # one look per scope: a half-open scope's probe covers all its targets
        admitted = []
        for target in targets:
            part = part_of(target) if part_of is not None else None
            if part in self.paused_parts:  # paused by an operator: waits without a try until resumed
                verdicts[f"paused:{part}"] = self.paused_parts[part]
                continue
            if part is not None:  # the part's own token bucket: one token per message for all its targets
                if f"rate:{part}" not in verdicts:
                    verdicts[f"rate:{part}"] = self._part_token(part)
                if verdicts[f"rate:{part}"]:
                    continue
            scope = scope_of(target)
            owner = self._scope_owner.setdefault(scope, part or provider.name)  # the part's gate: its own breaker
            if scope not in verdicts:
                verdicts[scope] = self._scope_verdict(owner, scope)
            if not verdicts[scope]:
                admitted.append(target)
        held = [until for until in verdicts.values() if until]
        return tuple(admitted), min(held) if held else 0.0

    def _scope_verdict(self, owner: str, scope: str) -> float:
        """gate_held_until for the scope, without a Redis round trip while it was found open under
        ROUTE_RECHECK_SECONDS ago and nothing failed there since (as the engine's lanes do per scope)."""
        key = (owner, scope)
        if self._scope_clear_until.get(key, 0.0) > self.clock():
            return 0.0
        until = self.gate_held_until(self.gate(owner, scope))
        if not until:
            self._scope_clear_until[key] = self.clock() + ROUTE_RECHECK_SECONDS
            self._scope_fresh.add(key)
        return until

    def _part_token(self, part: str) -> float:
        """Take a token of part's bucket (a short wait is slept): 0.0, or when the next one is due (epoch s)."""
        bucket = self._part_buckets.get(part)
        if bucket is None:
            bucket = self._part_buckets[part] = TokenBucket(self.client, part, limit_for(part, self.config))
        if not bucket.limit.rate:
            return 0.0
        wait = self.guard(bucket.take, 0.0)
        while 0 < wait <= self.max_wait:
            self.sleep(wait)
            wait = self.guard(bucket.take, 0.0)
        return self.clock() + wait if wait > 0 else 0.0

    def gate(self, provider: str, scope: str) -> Gate:
        """The gate of one scope of provider (made once per router; call from the router's own thread)."""
        key = (provider, scope)
        if key not in self._gates:
            self._gates[key] = Gate(self.client, provider, scope, self.settings, self.clock)
        return self._gates[key]

    def gate_held_until(self, gate: Gate) -> float:
        """0.0 when gate's scope may be sent to now, else when to ask again, at most RETRY_CAP_SECONDS ahead.

        Safe from a send lane's thread: it reads the router's settings only.
        """
        until = self.guard(gate.held_until, 0.0)
        return min(until, self.clock() + self.cap) if until else 0.0

    def report_gate(self, gate: Gate, outcome: str, retry_after: float | None = None) -> None:
        """Tell gate's scope how a send to it went (safe from a send lane's thread, as gate_held_until)."""
        if outcome == "sent":
            self.guard(gate.breaker.success, None)
        elif retry_after:
            self.guard(lambda: gate.bucket.pause(min(retry_after, self.cap)), None)
        elif outcome == "transient":
            self.guard(gate.breaker.failure, None)

    def report(
        self,
        provider: Provider,
        outcome: str,
        retry_after: float | None = None,
        targets: tuple[TargetOutcome, ...] = (),
    ) -> None:
        """Tell the breaker and bucket how a send went (outcome sent | transient | permanent); with
        targets (each target's own outcome), each answer goes to its own scope's gate instead."""
        breaker = self.breakers[provider.name]
        if outcome != "sent":
            self._clear_until.pop(provider.name, None)  # ask Redis again before the next send
        if targets:
            for target in targets:
                self._report_scope(provider.name, target)
            if outcome == "sent":  # the provider works; one party's failures say nothing about the others
                self._owe_success(provider.name)
        elif outcome == "sent":
            self._owe_success(provider.name)
        elif retry_after:
            # "Slow down" is not an outage: pause the bucket for everyone, leave the breaker alone.
            self.guard(lambda: self.buckets[provider.name].pause(min(retry_after, self.cap)), None)
        elif outcome == "transient":
            self.guard(breaker.failure, None)

    def _owe_success(self, name: str) -> None:
        # A success rides on the next route()'s round trip (or the batch's end): it still reaches the
        # breaker before this router asks it anything again, at one Redis round trip per send, not three.
        if name not in self._owed:
            self._owed.append(name)

    def _pay_owed(self) -> None:
        """Send the owed successes now (the batch is over)."""
        owed, self._owed = self._owed, []
        for name in owed:
            self.breakers[name].success()

    def _allow_and_take(self, name: str) -> tuple[Permit, float]:
        """In one round trip: the owed successes, then the breaker's allow() and the bucket's take().

        On a Redis Cluster the provider's allow and take go to one node (one hash tag); owed successes of other
        providers may go to others, written to each before any answer is read.

        The token is taken even when the breaker refuses; that provider sends nothing then, and its
        bucket refills by itself, so a refused route costs at most one of a failing provider's tokens.
        """
        owed, self._owed = self._owed, []
        breaker, bucket = self.breakers[name], self.buckets[name]
        for attempt in (1, 2):
            pipe = self.client.pipeline(transaction=False)
            for owed_name in owed:
                self.breakers[owed_name].success_on(pipe)
            breaker.allow_on(pipe)
            bucket.take_on(pipe)
            try:
                answers = pipe.execute()
                break
            except NoScriptError:
                if attempt == 2:
                    raise
                for each in (*(self.breakers[o] for o in owed), breaker):  # a Redis that forgot the scripts
                    each.load_scripts()
                bucket.load_script()
        for owed_name, transition in zip(owed, answers, strict=False):
            self.breakers[owed_name].noted(transition)
        return breaker.permit(answers[-2]), bucket.wait_of(answers[-1])

    def _report_scope(self, provider: str, target: TargetOutcome) -> None:
        owner = self._scope_owner.get(target.scope, provider)
        key = (owner, target.scope)
        if target.outcome == "sent":
            if key not in self._scope_fresh:
                return  # a success after the one that followed a look changes nothing: no round trip
            self._scope_fresh.discard(key)  # right after a look: it may be a half-open breaker's probe
        else:
            self._scope_clear_until.pop(key, None)  # ask the gate again before the next send there
            self._scope_fresh.discard(key)
        self.report_gate(self.gate(owner, target.scope), target.outcome, target.retry_after)

    def _enter(self, provider: Provider) -> Provider:
        if provider.name not in self._open:
            self._stack.enter_context(provider)
            self._open.add(provider.name)
        return provider

    @staticmethod
    def guard(call, default):
        """call(), or default (logged) when the realtime store does not answer: routing fails open."""
        try:
            return call()
        except REALTIME_ERRORS as exc:
            log.warning("rate limit / circuit breaker state unavailable (%s); sending without it", exc)
            return default
