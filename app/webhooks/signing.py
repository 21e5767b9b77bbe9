"""Standard Webhooks signatures, made by the standardwebhooks package, and the endpoint secrets they need, sealed.

A secret is `whsec_` + base64 of 32 random bytes (the form the standardwebhooks package reads). It
has to be recoverable, because signing needs the secret itself (a hash could only verify), so it is
stored sealed: AES-256-GCM under a key derived from SECRET_KEY with HKDF, the endpoint id as the
associated data (a sealed secret copied to another row does not open). See SECURITY.md.
"""

from __future__ import annotations

import base64
import os
import secrets
from datetime import UTC, datetime

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from standardwebhooks.webhooks import Webhook

SECRET_PREFIX = "whsec_"  # noqa: S105 - the form of a secret, not one
SEALED_PREFIX = "v1:"


def new_secret() -> str:
    """A fresh signing secret, shown to the operator once."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def secret_bytes(secret: str) -> bytes:
    """The HMAC key a whsec_ secret stands for."""
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def signature(key: bytes, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The webhook-signature header value (`v1,` + base64 HMAC-SHA256 of "id.timestamp.body"), by the package."""
    return Webhook(key).sign(webhook_id, datetime.fromtimestamp(timestamp, UTC), body.decode())


def headers(key: bytes, webhook_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers plus the content type."""
    return {
        "content-type": "application/json",
        "webhook-id": webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(key, webhook_id, timestamp, body),
    }


def _sealing_key(app_secret: str) -> bytes:
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"hato-webhook-secrets", info=b"v1")
    return hkdf.derive(app_secret.encode())


def seal(secret: str, endpoint_id: int, app_secret: str) -> str:
    """The secret encrypted for storage in endpoint endpoint_id's row."""
    nonce = os.urandom(12)
    sealed = AESGCM(_sealing_key(app_secret)).encrypt(nonce, secret.encode(), str(endpoint_id).encode())
    return SEALED_PREFIX + base64.b64encode(nonce + sealed).decode()


def unseal(sealed: str, endpoint_id: int, app_secret: str) -> str:
    """The secret back from its stored form (raises cryptography's InvalidTag when it was tampered with)."""
    raw = base64.b64decode(sealed.removeprefix(SEALED_PREFIX))
    return AESGCM(_sealing_key(app_secret)).decrypt(raw[:12], raw[12:], str(endpoint_id).encode()).decode()
