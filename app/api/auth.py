"""Who is calling the API: the bearer key of this request (never a cookie), and its rate-limit bucket."""

from __future__ import annotations

from flask import request

from app.api_keys.service import KEY_PREFIX, ApiKeyIdentity, authenticate


def bearer_token() -> str | None:
    """Return the token from `Authorization: Bearer …`, or None (cookies are never looked at)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(KEY_PREFIX) or len(token) > 200:
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
