"""API keys: create (shown once), revoke, and authenticate a bearer token; only a hash and a prefix are stored.

Keys are 256 random bits, so a fast hash is enough (slow KDFs are for human passwords). A request
looks its key up by the prefix (unique index) and compares hashes in constant time; the same lookup
loads the key's scopes (app/api_keys/scopes.py), so checking them costs no query. `last_used_at`
is written at most once a minute per key, never once per request, and a verified key is remembered
for CACHE_SECONDS so most requests need no lookup at all. Creating, changing scopes and revoking are
audited, whether an operator does it in the console or the CLI does.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa
from flask_babel import gettext
from sqlalchemy.exc import IntegrityError

from app.api_keys.scopes import DEFAULT_SCOPES, normalize
from app.audit import service as audit
from app.extensions import db
from app.limits import API_KEY_NAME_MAX
from app.quotas import settings as quota_settings
from app.quotas.counter import Quota
from app.refusal import Refused
from app.unitofwork import commit

KEY_PREFIX = "hato_"
# "hato_" + 8 characters (48 random bits): enough to find the row, useless as a secret.
PREFIX_LENGTH = len(KEY_PREFIX) + 8
TOUCH_INTERVAL_SECONDS = 60
# A verified key is trusted for this long without asking the database again: the lookup is then
# once per key and process every few seconds, not once per request. A revocation reaches every
# process within this time, and the revoking process at once (forget()). Unknown keys are never cached.
CACHE_SECONDS = 2.0

CREATE_SQL = sa.text(
    """
INSERT INTO api_keys (name, prefix, key_hash, created_by, scopes)
VALUES (:name, :prefix, :key_hash, :created_by, CAST(:scopes AS text[]))
RETURNING id
"""
)

REVOKE_SQL = sa.text(
    "UPDATE api_keys SET revoked_at = now() WHERE prefix = :prefix AND revoked_at IS NULL RETURNING id"
)

# FOR UPDATE: two admins editing one key at once each audit the true `before`, and neither edit is lost.
SCOPES_SQL = sa.text("SELECT scopes FROM api_keys WHERE prefix = :prefix AND revoked_at IS NULL FOR UPDATE")
SET_SCOPES_SQL = sa.text("UPDATE api_keys SET scopes = CAST(:scopes AS text[]) WHERE prefix = :prefix")
QUOTA_SQL = sa.text(
    "SELECT rate_per_second, rate_burst, daily_quota FROM api_keys WHERE prefix = :prefix AND revoked_at IS NULL "
    "FOR UPDATE"
)
SET_QUOTA_SQL = sa.text(
    "UPDATE api_keys SET rate_per_second = :rate, rate_burst = :burst, daily_quota = :daily WHERE prefix = :prefix"
)

LOOKUP_SQL = sa.text(
    f"""
SELECT id, name, prefix, key_hash, scopes, rate_per_second, rate_burst, daily_quota,
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


@dataclass(frozen=True)
class ApiKeyIdentity:
    """The key a request authenticated with."""

    id: int
    name: str
    prefix: str
    scopes: frozenset[str] = frozenset()
    quota: Quota | None = None  # its rate and daily quota of notifications (app/quotas), when set

    def quotas(self) -> list[Quota]:
        """The key's own limits, as the quota counter takes them."""
        return [self.quota] if self.quota is not None and self.quota.limited else []

    def allows(self, scope: str) -> bool:
        """Whether the key was given scope."""
        return scope in self.scopes

    @property
    def audit_label(self) -> str:
        """Who the audit log names for a change this key made."""
        return f"api key {self.name} ({self.prefix})"


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


def create_api_key(actor, name: str, scopes: Iterable[str] = DEFAULT_SCOPES) -> str:
    """Create a key named name with scopes; return the key itself (shown once, never stored)."""
    name = name.strip()
    if not name or len(name) > API_KEY_NAME_MAX or "\x00" in name:
        raise Refused(gettext("The key's name must have 1 to %(max)s characters.", max=API_KEY_NAME_MAX))
    scopes = list(normalize(scopes))
    for _ in range(3):
        key = generate_key()
        params = {"name": name, "prefix": key_prefix(key), "key_hash": hash_key(key),
                  "created_by": getattr(actor, "id", None), "scopes": scopes}  # fmt: skip
        try:
            with db.session.begin_nested():
                db.session.execute(CREATE_SQL, params)
        except IntegrityError:
            continue  # a 48-bit prefix collision: draw another key
        prefix = params["prefix"]
        audit.record(
            actor, "api_key.create", "api_key", prefix, after={"name": name, "prefix": prefix, "scopes": scopes}
        )
        return key
    raise RuntimeError("could not draw a unique API key prefix")


def revoke_api_key(actor, prefix: str) -> None:
    """Revoke the live key with this prefix: requests using it get 401 from now on."""
    forget(prefix)
    if db.session.execute(REVOKE_SQL, {"prefix": prefix}).first() is None:
        raise Refused(gettext("That key does not exist or is already revoked."))
    audit.record(actor, "api_key.revoke", "api_key", prefix, before={"revoked": False}, after={"revoked": True})


def set_scopes(actor, prefix: str, scopes: Iterable[str]) -> bool:
    """Give the live key with prefix exactly these scopes; return whether anything changed (audited if so)."""
    scopes = list(normalize(scopes))
    before = db.session.execute(SCOPES_SQL, {"prefix": prefix}).scalar()
    if before is None:
        raise Refused(gettext("That key does not exist or is revoked."))
    if list(before) == scopes:
        return False
    db.session.execute(SET_SCOPES_SQL, {"prefix": prefix, "scopes": scopes})
    forget(prefix)  # this process at once; the others within CACHE_SECONDS
    audit.record(actor, "api_key.scopes", "api_key", prefix, before={"scopes": list(before)}, after={"scopes": scopes})
    return True


def set_quota(actor, prefix: str, rate: float | None, burst: int | None, daily: int | None) -> bool:
    """Set the live key's rate (requests/s, burst) and daily quota of notifications (None: no limit); audited.

    Return whether anything changed. Every process counts with the new limits within CACHE_SECONDS.
    """
    after = dict(zip(("rate", "burst", "daily"), quota_settings.checked(rate, burst, daily), strict=True))
    row = db.session.execute(QUOTA_SQL, {"prefix": prefix}).first()
    if row is None:
        raise Refused(gettext("That key does not exist or is revoked."))
    before = {"rate": row.rate_per_second, "burst": row.rate_burst, "daily": row.daily_quota}
    if before == after:
        return False
    db.session.execute(SET_QUOTA_SQL, {"prefix": prefix, **after})
    forget(prefix)
    audit.record(actor, "api_key.quota", "api_key", prefix, before=before, after=after)
    return True


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
        commit()  # its own small unit of work, before the request's
    quota = Quota(f"key:{row.id}", row.rate_per_second, row.rate_burst, row.daily_quota)
    identity = ApiKeyIdentity(row.id, row.name, row.prefix, frozenset(row.scopes), quota)
    _verified[digest] = (identity, time.monotonic() + CACHE_SECONDS)
    return identity


def forget(prefix: str) -> None:
    """Drop this process's cached verification of the key with prefix (called when it is revoked)."""
    for digest, (identity, _) in list(_verified.items()):
        if identity.prefix == prefix:
            _verified.pop(digest, None)
