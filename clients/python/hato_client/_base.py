"""What both clients share: the request, the retry policy with backoff and full jitter, problem+json parsing."""

from __future__ import annotations

import email.utils
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from hato_client import errors

VERSION = "0.1.0"
USER_AGENT = f"hato-client/{VERSION}"


@dataclass(frozen=True)
class Retry:
    """When and how long to wait before trying a call again.

    Attempt n (from 1) that fails on a status in `statuses` or a connection error waits Retry-After when the
    server sent it (up to `max_retry_after`; longer: no retry), else full jitter: uniform(0, min(cap, base·2ⁿ⁻¹)).
    """

    attempts: int = 4  # in all, the first included; 1 turns retries off
    base: float = 0.5
    cap: float = 20.0
    max_retry_after: float = 60.0
    statuses: frozenset[int] = field(default_factory=lambda: frozenset({429, 503}))

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """The full-jitter wait after failed attempt number `attempt` (1-based)."""
        return (rng or random).uniform(0, min(self.cap, self.base * 2 ** (attempt - 1)))


def retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _segment(value: str | int) -> str:
    """A path parameter, percent-encoded as one segment."""
    return quote(str(value), safe="")


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


def raise_for_problem(response: httpx.Response) -> None:
    """Raise the typed exception of a refused answer (problem+json, or any 4xx/5xx)."""
    if response.status_code < 400:
        return
    try:
        problem = response.json()
    except ValueError:
        problem = None
    if not isinstance(problem, dict):
        problem = {"title": response.reason_phrase, "detail": response.text[:500]}
    kwargs: dict[str, Any] = {
        "status": response.status_code,
        "title": str(problem.get("title") or response.reason_phrase),
        "type": str(problem.get("type") or "about:blank"),
        "errors": problem.get("errors") or [],
        "problem": problem,
        "headers": dict(response.headers),
    }
    detail = str(problem.get("detail") or kwargs["title"])
    cls = errors.error_class(response.status_code)
    if cls is errors.RateLimited:
        raise errors.RateLimited(detail, retry_after=retry_after(response.headers.get("Retry-After")), **kwargs)
    raise cls(detail, **kwargs)


def decode(response: httpx.Response) -> Any:
    """The answer's JSON (None for 204 and empty bodies)."""
    if response.status_code == 204 or not response.content:
        return None
    return response.json()


class Base:
    """Settings and the per-attempt decision shared by Hato and AsyncHato."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        user_token: str | None = None,
        retry: Retry | None = None,
        timeout: float = 10.0,
        accept_language: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if bool(api_key) == bool(user_token):
            raise ValueError("pass either api_key (the /v1 API) or user_token (the /v1/feed API)")
        self.base_url = base_url.rstrip("/")
        self.retry = retry or Retry()
        self.timeout = timeout
        self.headers = {"Authorization": f"Bearer {api_key or user_token}", "User-Agent": USER_AGENT}
        if accept_language:
            self.headers["Accept-Language"] = accept_language
        self.headers.update(headers or {})

    def _request_headers(self, idempotency_key: str | None) -> dict[str, str]:
        return {**self.headers, "Idempotency-Key": idempotency_key} if idempotency_key else dict(self.headers)

    def _wait(self, attempt: int, response: httpx.Response | None) -> float | None:
        """Seconds to wait before the next attempt, or None when this outcome is final."""
        if attempt >= self.retry.attempts:
            return None
        if response is None:
            return self.retry.backoff(attempt)
        if response.status_code not in self.retry.statuses:
            return None
        asked = retry_after(response.headers.get("Retry-After"))
        if asked is None:
            return self.retry.backoff(attempt)
        return asked if asked <= self.retry.max_retry_after else None

    @staticmethod
    def _keep(query: dict[str, Any] | None) -> dict[str, Any] | None:
        return {k: v for k, v in query.items() if v is not None} if query else None

    @staticmethod
    def _sleep(seconds: float) -> None:
        time.sleep(seconds)
