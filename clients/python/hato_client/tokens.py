"""User tokens signed by the product's backend: HS256 JWTs exactly as Hato's app/user_tokens verifies them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def sign_user_token(
    user: str,
    ttl: int,
    secret: str | Mapping[str, Any],
    *,
    kid: str | None = None,
    audience: str | None = None,
    tenant: str | None = None,
    now: int | None = None,
) -> str:
    """A token for member `user` (their external id) valid `ttl` seconds.

    `secret` is GET /v1/user-tokens/signing-secret's answer (it carries kid and audience), or its `secret`
    string (base64url) with `kid` (the key's prefix) and `audience` (Hato's BASE_URL) given here.
    """
    if isinstance(secret, Mapping):
        kid, audience, text = kid or secret["kid"], audience or secret["audience"], str(secret["secret"])
    else:
        text = secret
    if not kid or not audience:
        raise ValueError("kid and audience are needed (or pass the signing-secret answer as secret)")
    issued = int(time.time()) if now is None else now
    claims: dict[str, Any] = {"sub": user, "aud": audience.rstrip("/"), "iat": issued, "exp": issued + int(ttl)}
    if tenant is not None:
        claims["tenant"] = tenant
    header = {"alg": "HS256", "typ": "JWT", "kid": kid}
    signing_input = ".".join(_b64url(json.dumps(part, separators=(",", ":")).encode()) for part in (header, claims))
    key = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64url(signature)}"
