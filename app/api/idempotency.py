"""Idempotency-Key on POST/PUT/DELETE (IETF httpapi draft, Stripe semantics), scoped per API key.

Everything happens in the request's one transaction:

1. Claim: take a transaction-scoped advisory lock on (api key, Idempotency-Key) without waiting, and
   INSERT the key's row. A concurrent request with the same key cannot take the lock and gets 409 at
   once, instead of doing the work twice or queueing behind the first.
2. The view does its work, builds its response, stores it with store(response) and commits: the
   stored response commits with the work, so "committed" and "replayable" cannot disagree, and the
   commit releases the lock.
3. Same key, same request (method + path + canonical body): replay the stored status and body
   with `Idempotent-Replayed: true`. Different request: 422. Still running: 409.

Only successful (2xx) responses are stored; a request that fails (validation, unknown recipient,
crash, a process killed mid-request) rolls back, which takes its claim and lock with it, so the
client may retry with the same key at once. Records live 24 h; the sweeper prunes old rows.

A response that is a secret (a sign-in link) is withheld: only its status is stored, never its body,
and a replay gets 409 `already_issued` instead, so the table holds nothing that signs anyone in.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from functools import wraps

import sqlalchemy as sa
from flask import Response, request
from flask_babel import LazyString, gettext
from pydantic import BaseModel
from sqlalchemy.exc import SQLAlchemyError

from app import unitofwork
from app.api.auth import current_key
from app.api.schemas import ApiError
from app.driversql import compiled, fetchone
from app.extensions import db
from app.web.bodies import parse_json

log = logging.getLogger(__name__)

RETENTION_HOURS = 24
MAX_KEY_LENGTH = 255
# Printable ASCII without surrounding spaces; a quoted sf-string ("…") is fine and kept as sent.
KEY_PATTERN = r"^[!-~]([ -~]*[!-~])?$"
KEY_RE = re.compile(KEY_PATTERN)
ALREADY_ISSUED = "urn:hato:problem:already_issued"

# `held` is false while another transaction holds the key (in flight: 409). With the lock held, a
# conflict means a committed record: a replay, or a mismatch. A record older than the retention, or
# one committed unfinished by an older version of this code, is taken over. The 64-bit lock id is a
# hash of the pair; two live keys sharing one would only make one of them wait for a 409 retry.
CLAIM_SQL = sa.text(
    f"""
WITH lock AS (
  SELECT pg_try_advisory_xact_lock(hashtextextended(CAST(:api_key_id AS text) || ':' || :key, 0)) AS held
),
claimed AS (
  INSERT INTO idempotency_keys (api_key_id, key, method, path, request_hash)
  SELECT :api_key_id, :key, :method, :path, :request_hash FROM lock WHERE held
  ON CONFLICT (api_key_id, key) DO UPDATE
     SET method = EXCLUDED.method, path = EXCLUDED.path, request_hash = EXCLUDED.request_hash,
         response_status = NULL, response_body = NULL, created_at = now(), completed_at = NULL
   WHERE idempotency_keys.created_at < now() - interval '{RETENTION_HOURS} hours'
      OR idempotency_keys.completed_at IS NULL
  RETURNING id
)
SELECT lock.held, claimed.id FROM lock LEFT JOIN claimed ON true
"""
)

# The claim and the stored response run on every idempotent request: straight through psycopg (app/driversql.py).
CLAIM_DRIVER_SQL = compiled(CLAIM_SQL)

LOOKUP_SQL = sa.text(
    """
SELECT request_hash, response_status, response_body
FROM idempotency_keys WHERE api_key_id = :api_key_id AND key = :key
"""
)

COMPLETE_SQL = sa.text(
    """
UPDATE idempotency_keys
SET response_status = :status, response_body = CAST(:body AS jsonb), completed_at = now()
WHERE id = :id
"""
)
COMPLETE_DRIVER_SQL = compiled(COMPLETE_SQL)


@dataclass
class KeyClaim:
    """This request holds the Idempotency-Key until its transaction ends."""

    id: int
    stored: bool = False
    withheld: bool = False  # keep the status only, never the body


def header_key() -> str | None:
    """Return the Idempotency-Key header (taken as an opaque string), None if absent; 400 if malformed."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if len(key) > MAX_KEY_LENGTH or not KEY_RE.fullmatch(key):
        raise ApiError(
            400,
            gettext("Idempotency-Key must be 1-%(max)d printable ASCII characters, e.g. a UUID.", max=MAX_KEY_LENGTH),
        )
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


def claim(api_key_id: int, key: str, fingerprint: str) -> KeyClaim | Response:
    """Claim key for this request inside its transaction; or return the replay, or raise 409/422."""
    params = {
        "api_key_id": api_key_id,
        "key": key,
        "method": request.method,
        "path": request.path,
        "request_hash": fingerprint,
    }
    held, claim_id = fetchone(CLAIM_DRIVER_SQL, params)
    if not held:
        raise ApiError(
            409,
            gettext("A request with this Idempotency-Key is still in progress; retry shortly."),
            headers={"Retry-After": "1"},
        )
    if claim_id is not None:
        return KeyClaim(claim_id)
    # With the lock held, a conflicting record is a committed, finished request: nobody can change it.
    existing = db.session.execute(LOOKUP_SQL, params).one()
    unitofwork.rollback()
    if existing.request_hash != fingerprint:
        raise ApiError(
            422,
            gettext("This Idempotency-Key was already used for a different request; use a new key for a new request."),
        )
    return _replay(existing.response_status, existing.response_body)


def release() -> None:
    """Undo the request's work; the rollback also drops its claim and lock, freeing the key."""
    try:
        unitofwork.rollback()
    except SQLAlchemyError:
        log.exception("rollback after a failed idempotent request")


def json_response(status: int, body: BaseModel | None = None) -> Response:
    """The API's answer: the model as JSON, or no body."""
    if body is None:
        return Response(status=status)
    return Response(body.model_dump_json(), status=status, mimetype="application/json")


def store(response: Response) -> Response:
    """Keep response as the replay for the request's Idempotency-Key (if it has one), in its transaction.

    For a view declared @idempotent(withheld=…) only the status is kept, never the body.
    """
    held: KeyClaim | None = getattr(request, "hato_idempotency_claim", None)
    if held is not None:
        body = None if held.withheld else (response.get_data(as_text=True) or None)
        fetchone(COMPLETE_DRIVER_SQL, {"id": held.id, "status": response.status_code, "body": body})
        held.stored = True
    return response


@dataclass(frozen=True)
class Withheld:
    """What a replay of a secret answer says instead (lazy strings: in the replaying request's language)."""

    title: LazyString
    detail: LazyString


def idempotent(model: type[BaseModel] | None = None, withheld: Withheld | None = None):
    """Parse the JSON body as model (passed as `payload`) and apply Idempotency-Key around the view.

    The view must store() its response and commit; if it raises instead, its work and its claim are
    rolled back together. withheld says what the view's answer is (a sign-in link): its body is
    never stored, and a replay is a 409 whose title and detail say it cannot be shown again.
    """

    def decorate(view):
        @wraps(view)
        def wrapped(*args, **kwargs):
            # Its own connection, not the ORM session's: the claim, the view's work and the stored answer are one
            # transaction either way (a session used by the view joins it), and this path runs on every call.
            with unitofwork.on_connection():
                return _claimed(*args, **kwargs)

        def _claimed(*args, **kwargs):
            key = header_key()
            payload = parse_json(model) if model is not None else None
            if payload is not None:
                kwargs["payload"] = payload
            if key is None:
                return view(*args, **kwargs)
            canonical = payload.model_dump_json().encode() if payload is not None else b""
            outcome = claim(current_key().id, key, request_hash(request.method, request.path, canonical))
            if isinstance(outcome, Response):
                if withheld is not None:  # whatever the record holds (rows from before this rule included)
                    raise ApiError(409, str(withheld.detail), type=ALREADY_ISSUED, title=str(withheld.title))
                return outcome
            outcome.withheld = withheld is not None
            request.hato_idempotency_claim = outcome  # per request, not per app context (g)
            try:
                return view(*args, **kwargs)
            finally:
                if not outcome.stored:
                    release()

        wrapped.body_model = model  # what the OpenAPI document says the view takes
        wrapped.takes_idempotency_key = True
        return wrapped

    return decorate
