"""Who is calling the API: the bearer key of this request (never a cookie), what it may do, its rate-limit bucket."""

from __future__ import annotations

from functools import wraps

from flask import request
from flask_babel import gettext

from app.api.schemas import ApiError
from app.api_keys.scopes import SCOPES
from app.api_keys.service import KEY_PREFIX, ApiKeyIdentity, authenticate

INSUFFICIENT_SCOPE = "urn:hato:problem:insufficient_scope"
MAX_KEY_CHARS = 200  # a longer bearer token is no API key (401 before any lookup)


def bearer_token() -> str | None:
    """Return the token from `Authorization: Bearer …`, or None (cookies are never looked at)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(KEY_PREFIX) or len(token) > MAX_KEY_CHARS:
        return None
    return token


def current_key() -> ApiKeyIdentity | None:
    """Return the request's authenticated key (looked up once per request)."""
    # Kept on the request itself: an app context (g) can outlive one request.
    if not hasattr(request, "hato_api_key"):
        token = bearer_token()
        request.hato_api_key = authenticate(token) if token else None
    return request.hato_api_key


def rate_limit_key() -> str:
    """Flask-Limiter bucket: the API key's prefix, or the client address for unauthenticated calls."""
    key = current_key()
    return f"api-key:{key.prefix}" if key else f"api-ip:{request.remote_addr}"


def requires(scope: str):
    """Declare the scope a view needs: without it the key gets 403 insufficient_scope (RFC 6750 section 3.1).

    Checked before the body is read or an Idempotency-Key is claimed, so a refused call changes nothing.
    """
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")

    def decorate(view):
        @wraps(view)
        def wrapped(*args, **kwargs):
            key = current_key()
            if key is None or not key.allows(scope):
                raise ApiError(
                    403,
                    gettext(
                        "This API key lacks the scope %(scope)s; an admin can add it on the console's API keys page.",
                        scope=repr(scope),
                    ),
                    headers={"WWW-Authenticate": f'Bearer realm="hato", error="insufficient_scope", scope="{scope}"'},
                    type=INSUFFICIENT_SCOPE,
                    title=gettext("Insufficient scope"),
                    scope=scope,
                )
            return view(*args, **kwargs)

        wrapped.required_scope = scope  # read by the tests and kept in step with the OpenAPI document
        return wrapped

    return decorate
