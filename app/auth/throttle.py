"""Sign-in limits on failed attempts: per (account, client address), per client address, per account.

The client address is the TCP peer unless TRUSTED_PROXY_HOPS says how many reverse proxies in front
append to X-Forwarded-For (ProxyFix in create_app); without that, everyone behind the proxy is one client.
Only failures count (a right password never uses up a limit):

- LOGIN_RATE_LIMIT per (account, client address): a guesser at one address stops after a few tries,
  and that does not lock the account's owner out from anywhere else;
- LOGIN_CLIENT_RATE_LIMIT per client address across accounts: one address spraying many accounts;
- LOGIN_ACCOUNT_RATE_LIMIT per account, slower: a guesser spread over many addresses. So that it cannot
  lock the owner out either, it does not hold an address that has not failed a sign-in (any account)
  within its window. Such an address gets its attempt: a right password signs in; a wrong one counts
  and marks it, so a spread-out guesser gets one guess per fresh address per window past the ceiling.

The first two are Flask-Limiter decorators on the view. The ceiling counts every failure but lets some
clients past, which a decorator cannot express, so it uses the same limiter's storage directly.
"""

from __future__ import annotations

import logging
import time

from flask import current_app, request
from flask_limiter.util import get_remote_address
from limits import RateLimitItemPerSecond, parse_many
from werkzeug.exceptions import TooManyRequests

from app.extensions import REALTIME_ERRORS, limiter

log = logging.getLogger(__name__)

TOO_MANY = "Too many sign-in attempts."  # werkzeug's description; the page shows errors.MESSAGES[429] instead


def _account() -> str:
    return request.form.get("email", "").strip().lower()


def account_client_key() -> str:
    """Limiter key: the account tried and the client address."""
    return f"login:{_account()}:{get_remote_address()}"


def client_key() -> str:
    """Limiter key: the client address, whatever account it tries."""
    return f"login-client:{get_remote_address()}"


def account_client_limit() -> str:
    return current_app.config["LOGIN_RATE_LIMIT"]


def client_limit() -> str:
    return current_app.config["LOGIN_CLIENT_RATE_LIMIT"]


def failed(response) -> bool:
    """A refused sign-in (wrong e-mail or password, or an incomplete form) is what counts."""
    return response.status_code == 401


# --- the per-account ceiling ------------------------------------------------------------------------


def _enabled() -> bool:
    return current_app.config["RATELIMIT_ENABLED"]


def _ids(*parts: str) -> tuple[str, ...]:
    prefix = current_app.config["RATELIMIT_KEY_PREFIX"]  # the installation's namespace
    return (prefix, *parts) if prefix else parts


def _ceiling() -> list:
    return parse_many(current_app.config["LOGIN_ACCOUNT_RATE_LIMIT"])


def _failed_client_mark():
    """One failure marks the address for as long as the ceiling's longest window."""
    return RateLimitItemPerSecond(1, max(item.get_expiry() for item in _ceiling()))


def _client_has_failed() -> bool:
    return not limiter.limiter.test(_failed_client_mark(), *_ids("login-failed-client", get_remote_address()))


def check_account_ceiling() -> None:
    """Refuse (429) a sign-in to an account past its ceiling from an address that has failed one lately."""
    if not _enabled():
        return
    try:
        if not _client_has_failed():
            return
        for item in _ceiling():
            ids = _ids("login-account", _account())
            if not limiter.limiter.test(item, *ids):
                reset_at = limiter.limiter.get_window_stats(item, *ids).reset_time
                raise TooManyRequests(TOO_MANY, retry_after=max(1, int(reset_at - time.time())))
    except REALTIME_ERRORS as exc:  # the decorators' limits still hold (Flask-Limiter falls back)
        log.warning("sign-in ceiling unavailable: %s", exc)


def note_failure() -> None:
    """Count a failed sign-in against the account's ceiling and mark the client address as having failed."""
    if not _enabled():
        return
    try:
        for item in _ceiling():
            limiter.limiter.hit(item, *_ids("login-account", _account()))
        limiter.limiter.hit(_failed_client_mark(), *_ids("login-failed-client", get_remote_address()))
    except REALTIME_ERRORS as exc:
        log.warning("could not count a failed sign-in against the account ceiling: %s", exc)
