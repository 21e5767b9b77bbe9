"""The API's rate limit per key: counted in the blueprint's guard, one Redis round trip, RateLimit-* headers.

Flask-Limiter's request hooks resolve, build and sort every request's limits anew and wrap each in
objects of their own: about a tenth of a one-recipient ingest's CPU, for the API's one shared limit.
So the API counts that limit itself, with the extension's public strategy (`limiter.limiter`, over the
same storage, key prefix and keys as the shared limit it replaces) and writes the headers it wrote:
RateLimit-Limit, RateLimit-Remaining, X-RateLimit-Reset (epoch), Retry-After and RateLimit-Reset
(seconds). Flask-Limiter's own app-wide hooks step aside for API requests (skip_extension_hooks; a
request filter says the same should they not be found) and keep limiting every other page.
When the storage fails, the count goes on in this process's memory, as Flask-Limiter's in-memory
fallback does, and the storage is tried again after FALLBACK_SECONDS.

A call that creates notifications also counts against its quotas, in a Redis script of its own. Rather than a
second round trip, defer() leaves its hit to that script (app/quotas/counter.py take_counting(), which hits
the same keys the same way, before any quota, and takes nothing once a window is over): the call is then
counted against the API limit when its quotas are, after its body is read and its Idempotency-Key claimed
and before anything is written, and a call that ends before that (a replay, a refused body) is counted as it
ends (settle_deferred()). That holds where the limit's storage is the realtime store's Redis, where the
quotas count; elsewhere (a Redis Cluster, whose keys span slots, another storage, the in-memory fallback)
defer() counts at once, as check() does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial

from flask import Flask, Response, current_app, request
from limits import RateLimitItem, parse_many
from limits.storage import MemoryStorage
from limits.strategies import STRATEGIES, RateLimiter
from werkzeug.exceptions import TooManyRequests

from app.extensions import limiter, limiter_storage_uri
from app.quotas.counter import Window, WindowHit
from app.ratelimit_storage import HitAwareRedisStorage

log = logging.getLogger(__name__)

SCOPE = "api"  # the scope of the shared limit this replaces: its counters keep their Redis keys
FALLBACK_SECONDS = 5.0


@dataclass(frozen=True)
class Counted:
    """The limit that speaks for this request in its headers: its size, what it has left, when its window ends."""

    limit: int
    remaining: int
    reset_at: float  # epoch seconds

    def seconds_to_reset(self, at_least: int = 0) -> int:
        """As Flask-Limiter's RequestLimit.reset_at: the window's end, rounded up to the next second, from now."""
        return max(at_least, int(int(self.reset_at + 1) - time.time()))


@dataclass(frozen=True)
class Deferred:
    """A call's API limit, left to be counted with its quotas: its key, the identifiers and the limits."""

    key: str
    ids: tuple[str, ...]
    items: tuple[RateLimitItem, ...]
    storage: HitAwareRedisStorage

    def windows(self) -> list[Window]:
        """Its fixed windows as the quotas' script hits them: the keys Flask-Limiter's fixed window counts under."""
        return [Window(self.storage.prefixed_key(item.key_for(*self.ids)), item.get_expiry(), item.amount)
                for item in self.items]  # fmt: skip


@lru_cache(maxsize=16)
def _items(value: str) -> tuple[RateLimitItem, ...]:
    """The configured limits, smallest window first (the order Flask-Limiter checks them in)."""
    return tuple(sorted(parse_many(value))) if value else ()


class _Fallback:
    """The in-memory counters used while the storage is failing (per process, like Flask-Limiter's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, RateLimiter] = {}
        self.failed_until = 0.0

    def counter(self, strategy: str) -> RateLimiter:
        """The in-memory counter of strategy (made on first use)."""
        with self._lock:
            if strategy not in self._counters:
                self._counters[strategy] = STRATEGIES[strategy](MemoryStorage())
            return self._counters[strategy]


_fallback = _Fallback()


def _hit(item: RateLimitItem, ids: tuple[str, ...], strategy: str) -> tuple[bool, RateLimiter]:
    """Count one hit of item; return whether it was within the limit and the counter that said so."""
    if time.monotonic() >= _fallback.failed_until:
        counter = limiter.limiter  # the extension's strategy (its own in-memory one while it finds the storage dead)
        try:
            return counter.hit(item, *ids), counter
        except Exception:
            log.warning(
                "API rate limit counted in memory for %ss: storage unavailable", FALLBACK_SECONDS, exc_info=True
            )
            _fallback.failed_until = time.monotonic() + FALLBACK_SECONDS
    counter = _fallback.counter(strategy)
    return counter.hit(item, *ids), counter


def _ids(key: str) -> tuple[str, ...]:
    prefix = current_app.config["RATELIMIT_KEY_PREFIX"]
    return (prefix, key, SCOPE) if prefix else (key, SCOPE)


def _counted(item: RateLimitItem, ids: tuple[str, ...], counter: RateLimiter) -> Counted | None:
    """What a hit just made left of item (read from the hit itself: app/ratelimit_storage.py); None if unknown."""
    try:
        stats = counter.get_window_stats(item, *ids)
    except Exception:  # advisory headers: a rate-limit storage hiccup must not fail the answer
        log.warning("RateLimit headers left out: rate-limit storage unavailable", exc_info=True)
        return None
    return Counted(item.amount, stats.remaining, stats.reset_time)


def _refuse(counted: Counted | None, key: str, item) -> None:
    # As Flask-Limiter: the first limit breached stops the count and speaks in the headers.
    request.hato_rate_limit = counted
    log.info("ratelimit %s (%s) exceeded at endpoint: %s", item, key, SCOPE)
    raise TooManyRequests(retry_after=counted.seconds_to_reset(at_least=1) if counted else 1)


def check(key: str, refuse: bool = True) -> None:
    """Count this request against the API limit of key (its bucket); 429 once a window is used up (if refuse)."""
    config = current_app.config
    if not config["RATELIMIT_ENABLED"]:
        return
    ids, strategy = _ids(key), config["RATELIMIT_STRATEGY"]
    first = None
    for item in _items(config["API_RATE_LIMIT"]):
        allowed, counter = _hit(item, ids, strategy)
        counted = _counted(item, ids, counter)
        if not allowed:
            if refuse:
                _refuse(counted, key, item)
            request.hato_rate_limit = counted
            return
        first = first or counted
    request.hato_rate_limit = first  # none breached: the smallest window's


def defer(key: str) -> None:
    """Leave this request's count to its quotas' round trip (app/api/quotas.py) where it can be; else count now."""
    config = current_app.config
    if not config["RATELIMIT_ENABLED"]:
        return
    counter = limiter.limiter  # the extension's strategy over its storage (its in-memory one while that is dead)
    storage = counter.storage
    if (
        type(storage) is not HitAwareRedisStorage  # exactly: its Cluster subclass does not qualify
        or config["RATELIMIT_STRATEGY"] != "fixed-window"
        or config["REALTIME_REDIS_CLUSTER"]
        or storage.uri != limiter_storage_uri(config["REALTIME_REDIS_URL"])
        or time.monotonic() < _fallback.failed_until
    ):
        check(key)
        return
    request.hato_rate_limit_deferred = Deferred(key, _ids(key), _items(config["API_RATE_LIMIT"]), storage)


def take_deferred() -> Deferred | None:
    """The request's deferred count, now to be made (None: none is waiting)."""
    deferred: Deferred | None = getattr(request, "hato_rate_limit_deferred", None)
    request.hato_rate_limit_deferred = None
    return deferred


def count_deferred(deferred: Deferred, hits: list[WindowHit] | None) -> None:
    """Take the hits the quotas' script made (None: it could not run, so count here); 429 once a window is over."""
    if hits is None:
        check(deferred.key)
        return
    first = None
    for item, hit in zip(deferred.items, hits, strict=False):
        counted = Counted(item.amount, max(item.amount - hit.count, 0), hit.ends_at)
        if not hit.allowed:
            _refuse(counted, deferred.key, item)
        first = first or counted
    request.hato_rate_limit = first


def settle_deferred() -> None:
    """Count a call whose count was deferred but which ended before its quotas were counted (a replay, a 4xx)."""
    deferred = take_deferred()
    if deferred is not None:
        check(deferred.key, refuse=False)


def add_headers(response: Response) -> Response:
    """Attach the RateLimit-* headers of the limit this request was counted against (if it was)."""
    counted: Counted | None = getattr(request, "hato_rate_limit", None)
    config = current_app.config
    if counted is None or not config["RATELIMIT_HEADERS_ENABLED"]:
        return response
    reset_at = int(counted.reset_at + 1)
    seconds = max(1 if response.status_code == 429 else 0, int(reset_at - time.time()))
    headers = response.headers
    headers.set(config["RATELIMIT_HEADER_LIMIT"], str(counted.limit))
    headers.set(config["RATELIMIT_HEADER_REMAINING"], str(counted.remaining))
    headers.set(config["RATELIMIT_HEADER_RESET"], str(reset_at))
    # As Flask-Limiter: a Retry-After the answer already has (409 in progress, 503) is kept if it is later.
    retry_after_name = config["RATELIMIT_HEADER_RETRY_AFTER"]
    existing = headers.get(retry_after_name, "")
    retry_after = max(int(existing), seconds) if existing.isdigit() else seconds
    headers.set(retry_after_name, str(retry_after))
    headers.set("RateLimit-Reset", str(seconds))  # the IETF draft's header: seconds, not an epoch
    return response


def skip_extension_hooks(app: Flask, blueprint: str) -> int:
    """Make Flask-Limiter's before/after/teardown hooks return at once for blueprint's requests; return how many.

    Its request filter already skips them, but only after each hook has resolved the request's limits and
    context: about 5 % of a one-recipient ingest's CPU, for nothing. The hooks are found by their owner
    (Flask-Limiter 4.1 registers a bound method, a partial and a bound method on the app); a later version
    that registers them otherwise is logged, and its request filter keeps the API out of its count.
    """

    def owned(hook) -> bool:
        owner = hook.args[0] if isinstance(hook, partial) and hook.args else getattr(hook, "__self__", None)
        return owner is limiter

    def unless_blueprint(hook: Callable, passthrough: Callable) -> Callable:
        def hook_unless_blueprint(*args):
            return passthrough(*args) if request.blueprint == blueprint else hook(*args)

        return hook_unless_blueprint

    passthroughs = (
        (app.before_request_funcs, lambda: None),
        (app.after_request_funcs, lambda response: response),
        (app.teardown_request_funcs, lambda exc=None: None),
    )
    wrapped = 0
    for registry, passthrough in passthroughs:
        hooks = registry.get(None, [])
        for index, hook in enumerate(hooks):
            if owned(hook):
                hooks[index] = unless_blueprint(hook, passthrough)
                wrapped += 1
    if wrapped != len(passthroughs):
        log.warning("Flask-Limiter's hooks not found as expected (%d of 3): the API still passes through them", wrapped)
    return wrapped
