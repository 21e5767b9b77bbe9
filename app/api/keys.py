"""API keys: `hato_…` bearer keys; only a SHA-256 hash and a short lookup prefix are stored.

Keys are 256 random bits, so a fast hash is enough (slow KDFs are for human passwords). The
request looks the key up by its prefix (unique index) and compares hashes in constant time.
`last_used_at` is written at most once a minute per key, never once per request, and a verified
key is remembered for CACHE_SECONDS so most requests need no lookup at all.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

import sqlalchemy as sa
from flask import request

from app.extensions import db

KEY_PREFIX = "hato_"
# "hato_" + 8 characters (48 random bits): enough to find the row, useless as a secret.
PREFIX_LENGTH = len(KEY_PREFIX) + 8
TOUCH_INTERVAL_SECONDS = 60

LOOKUP_SQL = sa.text(
    f"""
SELECT id, name, prefix, key_hash,
       last_used_at IS NULL OR last_used_at < now() - interval '{TOUCH_INTERVAL_SECONDS} seconds' AS stale
FROM api_keys
WHERE prefix = :prefix AND revoked_at IS NULL
"""
)

# The guard makes the write happen once per interval even when many processes race for it.
TOUCH_SQL = sa.text(
    f"""
UPDATE api_keys SET last_used_at = now()
WHERE id = :id AND (last_used_at IS NULL OR last_used_at < now() - interval '{TOUCH_INTERVAL_SECONDS} seconds')
"""
)


# A verified key is trusted for this long without asking the database again: the lookup is then
# once per key and process every few seconds, not once per request. A revocation reaches every
# process within this time, and the revoking process at once (forget()). Unknown keys are never cached.
CACHE_SECONDS = 2.0


@dataclass(frozen=True)
class ApiKeyIdentity:
    """The key a request authenticated with."""

    id: int
    name: str
    prefix: str


_verified: dict[str, tuple[ApiKeyIdentity, float]] = {}  # key hash -> (identity, monotonic expiry)


def generate_key() -> str:
    """Return a new random key, `hato_` followed by 43 URL-safe characters."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """Return the SHA-256 hex digest stored for key."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def key_prefix(key: str) -> str:
    """Return the stored, displayable prefix of key."""
    return key[:PREFIX_LENGTH]


def bearer_token() -> str | None:
    """Return the token from `Authorization: Bearer …`, or None (cookies are never looked at)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token.startswith(KEY_PREFIX) or len(token) > 200:
        return None
    return token


def authenticate(token: str) -> ApiKeyIdentity | None:
    """Return the live key matching token, or None for unknown or revoked keys."""
    digest = hash_key(token)
    cached = _verified.get(digest)
    if cached is not None and cached[1] > time.monotonic():
        return cached[0]
    row = db.session.execute(LOOKUP_SQL, {"prefix": key_prefix(token)}).first()
    if row is None or not hmac.compare_digest(row.key_hash, digest):
        _verified.pop(digest, None)
        return None
    if row.stale:
        db.session.execute(TOUCH_SQL, {"id": row.id})
        db.session.commit()
    identity = ApiKeyIdentity(row.id, row.name, row.prefix)
    _verified[digest] = (identity, time.monotonic() + CACHE_SECONDS)
    return identity


def forget(prefix: str) -> None:
    """Drop this process's cached verification of the key with prefix (called when it is revoked)."""
    for digest, (identity, _) in list(_verified.items()):
        if identity.prefix == prefix:
            _verified.pop(digest, None)


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
