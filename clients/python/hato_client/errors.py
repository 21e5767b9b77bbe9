"""problem+json answers (RFC 9457) as typed exceptions, one class per status family."""

from __future__ import annotations

from typing import Any


class HatoError(Exception):
    """An answer Hato refused, or a call that never got an answer (status None)."""

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        title: str = "",
        type: str = "about:blank",  # noqa: A002 - the problem document's own name
        errors: list[dict[str, str]] | None = None,
        problem: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {title}: {detail}" if status else detail)
        self.status, self.title, self.detail, self.type = status, title, detail, type
        self.errors = errors or []
        self.problem = problem or {}
        self.headers = headers or {}

    @property
    def field_errors(self) -> dict[str, list[str]]:
        """The field errors by field name (a field may have several messages)."""
        by_field: dict[str, list[str]] = {}
        for error in self.errors:
            by_field.setdefault(error.get("field", ""), []).append(error.get("message", ""))
        return by_field


class APIConnectionError(HatoError):
    """No answer: the connection failed or timed out on every attempt."""


class BadRequest(HatoError):
    """400, 413, 415 and other 4xx answers without a class of their own."""


class AuthenticationError(HatoError):
    """401: no valid API key or user token (`code` says why a user token was refused)."""

    @property
    def code(self) -> str | None:
        return self.problem.get("code")


class PermissionDenied(HatoError):
    """403: the key lacks the scope (`scope`), or the member may not do this."""

    @property
    def scope(self) -> str | None:
        return self.problem.get("scope")


class NotFound(HatoError):
    """404."""


class Conflict(HatoError):
    """409: e.g. the first call with this Idempotency-Key is still running."""


class ValidationError(HatoError):
    """422: the request broke the API's rules; `errors` names each field."""


class RateLimited(HatoError):
    """429 after the retries ran out; `retry_after` is the server's wait in seconds."""

    def __init__(self, detail: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(detail, **kwargs)
        self.retry_after = retry_after


class ServerError(HatoError):
    """5xx (503 after the retries ran out)."""


BY_STATUS: dict[int, type[HatoError]] = {
    401: AuthenticationError,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    422: ValidationError,
    429: RateLimited,
}


def error_class(status: int) -> type[HatoError]:
    """The exception class for an HTTP status of 400 or more."""
    return BY_STATUS.get(status) or (ServerError if status >= 500 else BadRequest)
