"""Idempotency-Key on POST/PUT/DELETE (IETF httpapi draft, Stripe semantics), scoped per API key.

1. Claim: INSERT the (api key, Idempotency-Key) row first, in its own short transaction, so a
   concurrent request with the same key finds it at once (409) instead of doing the work twice.
2. The view does its work and ends with respond(): the response is stored in the same
   transaction as the work, so "committed" and "replayable" cannot disagree.
3. Same key, same request (method + path + canonical body): replay the stored status and body
   with `Idempotent-Replayed: true`. Different request: 422. Still running: 409.

Only successful (2xx) responses are stored; a request that fails (validation, unknown recipient,
crash) releases its claim and may be retried with the same key. Records live 24 h: after that, or
after a claim has been in flight for LEASE_SECONDS (its process died), the key can be claimed anew.
The sweeper prunes old rows.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from datetime import datetime
from functools import wraps

import sqlalchemy as sa
from flask import Response, request
from pydantic import BaseModel
from sqlalchemy.exc import SQLAlchemyError

from app.api.keys import current_key
from app.api.schemas import ApiError, parse_body
from app.extensions import db

log = logging.getLogger(__name__)

RETENTION_HOURS = 24
LEASE_SECONDS = 60
MAX_KEY_LENGTH = 255
# Printable ASCII without surrounding spaces; a quoted sf-string ("…") is fine and kept as sent.
KEY_PATTERN = r"^[!-~]([ -~]*[!-~])?$"
KEY_RE = re.compile(KEY_PATTERN)

# The claim's commit need not wait for its WAL flush (set_config(…, true) = SET LOCAL, in the same
# round trip): the work's own synchronous commit flushes the WAL up to and past the claim, and a claim
# lost in a crash before that only means the client's retry claims the key again.
CLAIM_SQL = sa.text(
    f"""
INSERT INTO idempotency_keys (api_key_id, key, method, path, request_hash)
SELECT :api_key_id, :key, :method, :path, :request_hash
FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit
ON CONFLICT (api_key_id, key) DO UPDATE
   SET method = EXCLUDED.method, path = EXCLUDED.path, request_hash = EXCLUDED.request_hash,
       response_status = NULL, response_body = NULL, created_at = now(), completed_at = NULL
 WHERE idempotency_keys.created_at < now() - interval '{RETENTION_HOURS} hours'
    OR (idempotency_keys.completed_at IS NULL
        AND idempotency_keys.created_at < now() - interval '{LEASE_SECONDS} seconds')
RETURNING id, created_at
"""
)

LOOKUP_SQL = sa.text(
    """
SELECT request_hash, response_status, response_body, completed_at
FROM idempotency_keys WHERE api_key_id = :api_key_id AND key = :key
"""
)

# created_at identifies this claim: a claim taken over after its lease ran out is not ours any more.
COMPLETE_SQL = sa.text(
    """
UPDATE idempotency_keys
SET response_status = :status, response_body = CAST(:body AS jsonb), completed_at = now()
WHERE id = :id AND created_at = :created_at
"""
)

RELEASE_SQL = sa.text(
    "DELETE FROM idempotency_keys WHERE id = :id AND created_at = :created_at AND completed_at IS NULL"
)


@dataclass
class Claim:
    """This request holds the key until it responds or releases it."""

    id: int
    created_at: datetime
    done: bool = False


def header_key() -> str | None:
    """Return the Idempotency-Key header (taken as an opaque string), None if absent; 400 if malformed."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if len(key) > MAX_KEY_LENGTH or not KEY_RE.fullmatch(key):
        raise ApiError(400, f"Idempotency-Key must be 1-{MAX_KEY_LENGTH} printable ASCII characters, "
                            "e.g. a UUID.")
    return key


def request_hash(method: str, path: str, canonical_body: bytes) -> str:
    """Return the fingerprint of a request: SHA-256 over method, path and the canonical body."""
    return hashlib.sha256(f"{method} {path}\n".encode() + canonical_body).hexdigest()


def _replay(status: int, body) -> Response:
    if body is None:
        response = Response(status=status)
    else:
        response = Response(json.dumps(body), status=status, mimetype="application/json")
    response.headers["Idempotent-Replayed"] = "true"
    return response


def claim(api_key_id: int, key: str, fingerprint: str) -> Claim | Response:
    """Claim key for this request and commit; or return the replay, or raise 409/422."""
    params = {"api_key_id": api_key_id, "key": key, "method": request.method, "path": request.path,
              "request_hash": fingerprint}
    for _ in range(3):
        row = db.session.execute(CLAIM_SQL, params).first()
        if row is not None:
            db.session.commit()
            return Claim(row.id, row.created_at)
        existing = db.session.execute(LOOKUP_SQL, params).first()
        db.session.commit()
        if existing is None:
            continue  # the holder released it between our two statements: claim again
        if existing.request_hash != fingerprint:
            raise ApiError(422, "This Idempotency-Key was already used for a different request; "
                                "use a new key for a new request.")
        if existing.completed_at is None:
            raise ApiError(409, "A request with this Idempotency-Key is still in progress; retry shortly.",
                           headers={"Retry-After": "1"})
        return _replay(existing.response_status, existing.response_body)
    raise ApiError(409, "This Idempotency-Key is busy; retry shortly.", headers={"Retry-After": "1"})


def release(held: Claim) -> None:
    """Undo the request's work and free its key so the client may retry with it."""
    try:
        db.session.rollback()
        db.session.execute(RELEASE_SQL, {"id": held.id, "created_at": held.created_at})
        db.session.commit()
    except SQLAlchemyError:
        # The claim then blocks the key until its lease runs out; the original error matters more.
        log.exception("could not release idempotency claim %s", held.id)
        db.session.rollback()


def respond(status: int, body: BaseModel | None = None) -> Response:
    """Store the response for the request's Idempotency-Key (if any), commit once, and return it."""
    payload = body.model_dump_json() if body is not None else None
    held: Claim | None = getattr(request, "hato_idempotency_claim", None)
    if held is not None:
        db.session.execute(COMPLETE_SQL, {"id": held.id, "created_at": held.created_at, "status": status,
                                          "body": payload})
    db.session.commit()
    if held is not None:
        held.done = True
    if payload is None:
        return Response(status=status)
    return Response(payload, status=status, mimetype="application/json")


def idempotent(model: type[BaseModel] | None = None):
    """Parse the JSON body as model (passed as `payload`) and apply Idempotency-Key around the view.

    The view must end with respond(); if it raises instead, its work is rolled back and the key released.
    """

    def decorate(view):
        @wraps(view)
        def wrapped(*args, **kwargs):
            key = header_key()
            payload = parse_body(model) if model is not None else None
            if payload is not None:
                kwargs["payload"] = payload
            if key is None:
                return view(*args, **kwargs)
            canonical = payload.model_dump_json().encode() if payload is not None else b""
            outcome = claim(current_key().id, key, request_hash(request.method, request.path, canonical))
            if isinstance(outcome, Response):
                return outcome
            request.hato_idempotency_claim = outcome  # per request, not per app context (g)
            try:
                return view(*args, **kwargs)
            finally:
                if not outcome.done:
                    release(outcome)

        return wrapped

    return decorate
