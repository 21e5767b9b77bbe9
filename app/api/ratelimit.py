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

from app.extensions import limiter

log = logging.getLogger(__name__)

SCOPE = "api"  # the scope of the shared limit this replaces: its counters keep their Redis keys
FALLBACK_SECONDS = 5.0


@dataclass
class Counted:
    """The limit that speaks for this request in its headers, and the identifiers it was counted under."""

    item: RateLimitItem
    ids: tuple[str, ...]
    counter: RateLimiter


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


def check(key: str) -> None:
    """Count this request against the API limit of key (its bucket); 429 once a window is used up."""
    config = current_app.config
    if not config["RATELIMIT_ENABLED"]:
        return
    prefix = config["RATELIMIT_KEY_PREFIX"]
    ids = (prefix, key, SCOPE) if prefix else (key, SCOPE)
    strategy = config["RATELIMIT_STRATEGY"]
    first = None
    for item in _items(config["API_RATE_LIMIT"]):
        allowed, counter = _hit(item, ids, strategy)
        counted = Counted(item, ids, counter)
        if not allowed:  # as Flask-Limiter: the first limit breached stops the count and speaks in the headers
            request.hato_rate_limit = counted
            log.info("ratelimit %s (%s) exceeded at endpoint: %s", item, key, SCOPE)
            raise TooManyRequests(retry_after=_seconds_to_reset(counted, at_least=1))
        first = first or counted
    request.hato_rate_limit = first  # none breached: the smallest window's


def _seconds_to_reset(counted: Counted, at_least: int = 0) -> int:
    # As Flask-Limiter's RequestLimit.reset_at: the window's end, rounded up to the next second.
    reset_at = int(counted.counter.get_window_stats(counted.item, *counted.ids).reset_time + 1)
    return max(at_least, int(reset_at - time.time()))


def add_headers(response: Response) -> Response:
    """Attach the RateLimit-* headers of the limit this request was counted against (if it was)."""
    counted: Counted | None = getattr(request, "hato_rate_limit", None)
    config = current_app.config
    if counted is None or not config["RATELIMIT_HEADERS_ENABLED"]:
        return response
    try:  # read from the hit just made (app/ratelimit_storage.py): no round trip
        stats = counted.counter.get_window_stats(counted.item, *counted.ids)
    except Exception:  # advisory headers: a rate-limit storage hiccup must not fail the answer
        log.warning("RateLimit headers left out: rate-limit storage unavailable", exc_info=True)
        return response
    reset_at = int(stats.reset_time + 1)
    seconds = max(1 if response.status_code == 429 else 0, int(reset_at - time.time()))
    headers = response.headers
    headers.set(config["RATELIMIT_HEADER_LIMIT"], str(counted.item.amount))
    headers.set(config["RATELIMIT_HEADER_REMAINING"], str(stats.remaining))
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
