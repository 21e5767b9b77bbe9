"""POST /hooks/providers/<provider>: e-mail providers tell Hato what happened to what it sent.

sendgrid, mailgun and postmark, each on only while its key is set (else 404). No session and no CSRF
token (the provider is the client); each request is authenticated the provider's own way before any of
its events is read (app/hooks/verify.py), limited per provider and client address (HOOK_RATE_LIMIT) and
in size (HOOK_MAX_BODY_BYTES). Refusals are problem+json 401/403 and change nothing; an accepted request
answers 200 with its counts, unknown message ids included (a provider retries anything else).
"""

from __future__ import annotations

import logging
import time

from flask import Blueprint, current_app, jsonify, request
from flask_babel import gettext
from redis.exceptions import RedisError
from werkzeug.exceptions import HTTPException

from app.extensions import csrf, limiter
from app.hooks import formats, service, verify
from app.unitofwork import commit
from app.web import bodies
from app.web.errors import problem

log = logging.getLogger(__name__)

bp = Blueprint("hooks", __name__, url_prefix="/hooks")
csrf.exempt(bp)

PROVIDERS = ("sendgrid", "mailgun", "postmark")


def _configured(provider: str) -> bool:
    config = current_app.config
    if provider == "sendgrid":
        return bool(config["SENDGRID_WEBHOOK_PUBLIC_KEY"])
    if provider == "mailgun":
        return bool(config["MAILGUN_WEBHOOK_SIGNING_KEY"])
    if provider == "postmark":
        return bool(config["POSTMARK_WEBHOOK_USER"] and config["POSTMARK_WEBHOOK_PASSWORD"])
    return False


def _limit_key() -> str:
    provider = (request.view_args or {}).get("provider", "")
    return f"hooks:{provider if provider in PROVIDERS else '-'}:{request.remote_addr}"


bp.register_error_handler(bodies.BadInput, bodies.refused)


@bp.errorhandler(HTTPException)
def hook_error(error: HTTPException):
    """Every refusal on this blueprint is problem+json (too many requests, a body over the limit …)."""
    response = problem(error.code or 500, gettext("The provider webhook request was refused."))
    if error.code == 429:
        response.headers["Retry-After"] = str(getattr(error, "retry_after", None) or 60)
    return response


@bp.post("/providers/<provider>")
@limiter.limit(lambda: current_app.config["HOOK_RATE_LIMIT"], key_func=_limit_key)
def provider_events(provider: str):
    """Verify, read and record one provider webhook request; 200 with the counts."""
    if provider not in PROVIDERS or not _configured(provider):
        return problem(404, gettext("There is no webhook for this provider here."))
    bodies.limit_body(current_app.config["HOOK_MAX_BODY_BYTES"])
    body = bodies.read_body()
    claimed: list[str] = []  # a Mailgun token this request took (given back if nothing is recorded)
    try:
        parsed = _verified_events(provider, body, claimed)
    except verify.Refused as refusal:
        response = problem(refusal.status, str(refusal.detail))
        response.headers.update(refusal.headers)
        return response
    except formats.PayloadError as exc:
        log.warning("provider webhook %s: unreadable body: %s", provider, exc)
        errors = bodies.field_errors(exc.validation, {}) if exc.validation is not None else None
        raise bodies.BadInput(400, gettext("The body is not what this provider sends."), errors) from None
    except RedisError as exc:  # the replay check needs Redis: the provider retries later
        log.warning("provider webhook %s: Redis unavailable for the replay check: %s", provider, exc)
        response = problem(503, gettext("The service is temporarily unavailable."))
        response.headers["Retry-After"] = "30"
        return response
    try:
        counts = service.record(parsed.events)
        commit()
    except Exception:
        for token in claimed:
            try:
                service.release_mailgun_token(token)
            except RedisError:
                log.warning("provider webhook mailgun: could not give back a token; its retry will be refused")
        raise
    return jsonify({**counts, "ignored": parsed.ignored})


def _verified_events(provider: str, body: bytes, claimed: list[str]) -> formats.Parsed:
    """Authenticate the request the provider's way, then (only then) read its events; claimed gets the token."""
    config = current_app.config
    now, max_age = time.time(), config["HOOK_MAX_AGE_SECONDS"]
    if provider == "sendgrid":
        verify.verify_sendgrid(config["SENDGRID_WEBHOOK_PUBLIC_KEY"], request.headers, body, now, max_age)
        return formats.parse_sendgrid(body)
    if provider == "mailgun":
        try:
            signature, document = formats.mailgun_signed(body)
        except formats.PayloadError:
            raise verify.Refused(401, gettext("The request carries no Mailgun signature.")) from None

        def claim(token: str, ttl: float) -> bool:
            new = service.claim_mailgun_token(token, ttl)
            if new:
                claimed.append(token)
            return new

        verify.verify_mailgun(config["MAILGUN_WEBHOOK_SIGNING_KEY"], signature, now, max_age, claim)
        return formats.parse_mailgun(document)
    verify.verify_postmark(config["POSTMARK_WEBHOOK_USER"], config["POSTMARK_WEBHOOK_PASSWORD"], request.authorization)
    return formats.parse_postmark(body)
