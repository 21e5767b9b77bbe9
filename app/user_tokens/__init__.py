"""Signed user tokens: short-lived JWTs (HS256) that let an embedding page read and update one member's feed.

A token is signed with its API key's signing secret, which is derived (HMAC-SHA256 of SECRET_KEY and the
key's prefix) rather than stored: no migration, nothing new to leak from a database dump, and revoking the
key (or taking its feed:issue scope) invalidates every token it signed at once. The `kid` header names the
key; `aud` must be this Hato's BASE_URL; `sub` is the member's external id. An optional `tenant` claim (a tenant's
key, issue 32) scopes the token to that tenant's notifications: the member must belong to it, checked at every use.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass

import jwt
import sqlalchemy as sa
from flask import current_app

from app.api_keys.service import ApiKeyIdentity
from app.extensions import db
from app.links import origin_of

ALGORITHM = "HS256"
SCOPE = "feed:issue"
# Clocks of the product's backend and of Hato differ a little; a few seconds either way is tolerated.
LEEWAY_SECONDS = 5
MAX_TOKEN_CHARS = 2048

KEY_SQL = sa.text("SELECT id, name, prefix, scopes FROM api_keys WHERE prefix = :prefix AND revoked_at IS NULL")
MEMBER_SQL = sa.text("SELECT id, role FROM users WHERE external_id = :external_id")
# The tenant a token names, if the member still belongs to it.
TENANT_SQL = sa.text(
    "SELECT t.id FROM tenants t JOIN tenant_members m ON m.tenant_id = t.id AND m.user_id = :user_id WHERE t.key = :key"
)


class TokenError(ValueError):
    """A token that cannot be used; code says why (for programs), the message for people."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True)
class FeedUser:
    """Who a verified token speaks for, and until when (epoch seconds)."""

    user_id: int
    external_id: str
    expires_at: int
    key_prefix: str
    tenant_id: int | None = None  # the `tenant` claim's: the feed shows only that tenant's notifications


def signing_secret(prefix: str) -> bytes:
    """Return the HS256 secret of the API key with this prefix."""
    secret_key = current_app.config["SECRET_KEY"]
    secret_key = secret_key.encode() if isinstance(secret_key, str) else secret_key
    return hmac.new(secret_key, b"hato-user-token\x00" + prefix.encode(), hashlib.sha256).digest()


def signing_secret_text(prefix: str) -> str:
    """Return the signing secret as the product's backend stores it (base64url, no padding)."""
    return base64.urlsafe_b64encode(signing_secret(prefix)).rstrip(b"=").decode()


def audience() -> str:
    """Return the `aud` every token must carry: this Hato's BASE_URL."""
    return current_app.config["BASE_URL"].rstrip("/")


def mint(key: ApiKeyIdentity, external_id: str, ttl: int, tenant: str | None = None) -> tuple[str, int]:
    """Return a token for the member external_id (scoped to the tenant with key tenant, if given), valid ttl
    seconds, and its expiry (epoch seconds)."""
    now = int(time.time())
    expires_at = now + int(ttl)
    claims = {"sub": external_id, "aud": audience(), "iat": now, "exp": expires_at}
    if tenant is not None:
        claims["tenant"] = tenant
    token = jwt.encode(claims, signing_secret(key.prefix), algorithm=ALGORITHM, headers={"kid": key.prefix})
    return token, expires_at


def tenant_of(user_id: int, key: str) -> int | None:
    """The id of the tenant with this key when the member belongs to it, else None."""
    return db.session.execute(TENANT_SQL, {"user_id": user_id, "key": key}).scalar()


def member_id(external_id: str) -> int | None:
    """Return the id of the member with this external id (None for unknown ids and operators)."""
    row = db.session.execute(MEMBER_SQL, {"external_id": external_id}).first()
    return row.id if row is not None and row.role == "member" else None


def verify(token: str) -> FeedUser:
    """Return who a token speaks for; TokenError(code) if it is malformed, expired, for another Hato or forged."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        raise TokenError("malformed")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise TokenError("malformed") from None
    prefix = header.get("kid")
    if header.get("alg") != ALGORITHM or not isinstance(prefix, str) or not prefix or len(prefix) > 64:
        raise TokenError("malformed")
    key = db.session.execute(KEY_SQL, {"prefix": prefix}).first()
    # An unknown, revoked or de-scoped key is indistinguishable from a forged signature to the caller.
    if key is None or SCOPE not in (key.scopes or ()):
        raise TokenError("signature")
    try:
        claims = jwt.decode(
            token,
            signing_secret(prefix),
            algorithms=[ALGORITHM],
            audience=audience(),
            leeway=LEEWAY_SECONDS,
            options={"require": ["exp", "sub", "aud"]},
        )
    except jwt.ExpiredSignatureError:
        raise TokenError("expired") from None
    except (jwt.InvalidAudienceError, jwt.MissingRequiredClaimError) as exc:
        raise TokenError("audience" if isinstance(exc, jwt.InvalidAudienceError) else "claims") from None
    except jwt.InvalidSignatureError:
        raise TokenError("signature") from None
    except jwt.PyJWTError:
        raise TokenError("malformed") from None
    external_id = claims["sub"]
    user_id = member_id(external_id) if isinstance(external_id, str) else None
    if user_id is None:
        raise TokenError("unknown_user")
    tenant_id = None
    if "tenant" in claims:  # a tenant that is gone, or that the member left, refuses the token
        tenant = claims["tenant"]
        tenant_id = tenant_of(user_id, tenant) if isinstance(tenant, str) and len(tenant) <= 100 else None
        if tenant_id is None:
            raise TokenError("tenant")
    return FeedUser(user_id, external_id, int(claims["exp"]), prefix, tenant_id)


def feed_origin_allowed(origin: str | None) -> bool:
    """Return whether a page of this origin may call the feed API and open its socket (FEED_ALLOWED_ORIGINS)."""
    wanted = origin_of(origin or "")
    return bool(wanted) and wanted in {origin_of(o) for o in current_app.config["FEED_ALLOWED_ORIGINS"]}
