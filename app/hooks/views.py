"""POST /hooks/providers/<provider>: providers tell Hato what happened to what it sent, and what members replied.

E-mail: sendgrid, mailgun and postmark, each on only while its key is set (else 404). SMS (issue 29): twilio
(status callbacks) and twilio/inbound (replies), on while TWILIO_AUTH_TOKEN is set; vonage and vonage/inbound,
on while VONAGE_SIGNATURE_SECRET is set (app/hooks/twilio.py, vonage.py, sms_events.py). No session and no CSRF
token (the provider is the client); each request is authenticated the provider's own way before any of
its events is read (app/hooks/verify.py), limited per provider and client address (HOOK_RATE_LIMIT) and
in size (HOOK_MAX_BODY_BYTES). Refusals are problem+json 401/403 and change nothing; an accepted request
answers 200 with its counts, unknown message ids included (a provider retries anything else).
"""

from __future__ import annotations

import logging
import time

from flask import Blueprint, Response, current_app, jsonify, request
from flask_babel import gettext
from redis.exceptions import RedisError
from twilio.twiml.messaging_response import MessagingResponse
from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import HTTPException

from app.extensions import csrf, limiter
from app.hooks import formats, service, sms_events, twilio, verify, vonage
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


# --- SMS: Twilio and Vonage ---------------------------------------------------------------------------


def _sms_limit_key() -> str:
    provider = "twilio" if request.path.startswith("/hooks/providers/twilio") else "vonage"
    return f"hooks:{provider}:{request.remote_addr}"


@bp.errorhandler(verify.Refused)
def sms_refused(refusal: verify.Refused):
    """A request that is not the provider's (or for a provider that is off) changes nothing."""
    response = problem(refusal.status, str(refusal.detail))
    response.headers.update(refusal.headers)
    return response


@bp.errorhandler(formats.PayloadError)
def sms_unreadable(exc: formats.PayloadError):
    """A verified body of another shape: 400 (the provider shows it in its debugger)."""
    log.warning("provider webhook %s: unreadable body: %s", request.path, exc)
    return problem(400, gettext("The body is not what this provider sends."))


def _off() -> verify.Refused:
    return verify.Refused(404, gettext("There is no webhook for this provider here."))


def _twilio_verified() -> MultiDict:
    """The form of a request Twilio signed for this installation's public URL (BASE_URL); Refused otherwise."""
    config = current_app.config
    if not config["TWILIO_AUTH_TOKEN"]:
        raise _off()
    bodies.limit_body(config["HOOK_MAX_BODY_BYTES"])
    try:
        fields = twilio.form(bodies.read_body())
    except formats.PayloadError:
        raise verify.Refused(401, gettext("The Twilio signature does not match.")) from None
    # Behind TRUSTED_PROXY_HOPS proxies the Host and scheme the app sees are not what Twilio posted to: BASE_URL is.
    url = twilio.public_url(config["BASE_URL"], request.path, request.query_string)
    twilio.verify(config["TWILIO_AUTH_TOKEN"], url, fields, request.headers.get(twilio.SIGNATURE))
    return fields


def _vonage_verified() -> bytes:
    """The body of a request Vonage signed with VONAGE_SIGNATURE_SECRET, fresh; Refused otherwise."""
    config = current_app.config
    if not config["VONAGE_SIGNATURE_SECRET"]:
        raise _off()
    bodies.limit_body(config["HOOK_MAX_BODY_BYTES"])
    body = bodies.read_body()
    vonage.verify(config["VONAGE_SIGNATURE_SECRET"], request.headers.get("Authorization"), body, time.time(),
                  config["HOOK_MAX_AGE_SECONDS"])  # fmt: skip
    return body


class _Unavailable(Exception):
    """Redis is down: the reply cannot be checked for a replay, so the provider is asked to retry."""


@bp.errorhandler(_Unavailable)
def sms_unavailable(_error: _Unavailable):
    response = problem(503, gettext("The service is temporarily unavailable."))
    response.headers["Retry-After"] = "30"
    return response


def _acted_on(inbound) -> str | None:
    """The reply's keyword once it is acted on and committed (None: no keyword, or acted on before)."""
    try:
        word = sms_events.reply(inbound)
    except RedisError as exc:
        log.warning("SMS reply: Redis unavailable for the replay check: %s", exc)
        raise _Unavailable from None
    try:
        commit()
    except Exception:
        if word is not None:
            try:
                sms_events.release_reply(inbound)
            except RedisError:
                log.warning("SMS reply: could not give back its claim; the provider's retry will be ignored")
        raise
    return word


@bp.post("/providers/twilio")
@limiter.limit(lambda: current_app.config["HOOK_RATE_LIMIT"], key_func=_sms_limit_key)
def twilio_status():
    """Twilio's status callback for one message (the StatusCallback every send names); 200 with the counts."""
    parsed = twilio.parse_status(_twilio_verified())
    counts = sms_events.record(parsed.events, twilio.RECIPIENT_ERRORS)
    commit()
    return jsonify({**counts, "ignored": parsed.ignored})


@bp.post("/providers/twilio/inbound")
@limiter.limit(lambda: current_app.config["HOOK_RATE_LIMIT"], key_func=_sms_limit_key)
def twilio_inbound():
    """A member's SMS to the Twilio number: act on STOP / START; TwiML answers HELP with the help text."""
    word = _acted_on(twilio.parse_inbound(_twilio_verified()))
    answer = MessagingResponse()
    if word == "help":
        answer.message(current_app.config["SMS_HELP_TEXT"])
    return Response(str(answer), mimetype="text/xml")


@bp.post("/providers/vonage")
@limiter.limit(lambda: current_app.config["HOOK_RATE_LIMIT"], key_func=_sms_limit_key)
def vonage_status():
    """Vonage's status webhook for one message (the application's Status URL); 200 with the counts."""
    parsed = vonage.parse_status(_vonage_verified())
    counts = sms_events.record(parsed.events, vonage.RECIPIENT_ERRORS)
    commit()
    return jsonify({**counts, "ignored": parsed.ignored})


@bp.post("/providers/vonage/inbound")
@limiter.limit(lambda: current_app.config["HOOK_RATE_LIMIT"], key_func=_sms_limit_key)
def vonage_inbound():
    """A member's SMS to the Vonage number: act on STOP / START; HELP is answered by an SMS through Vonage."""
    inbound = vonage.parse_inbound(_vonage_verified())
    word = _acted_on(inbound) if inbound is not None else None
    # Vonage's webhook takes no reply text: the answer is an SMS of its own, once the keyword is recorded.
    answered = word == "help" and inbound is not None and sms_events.send_help(current_app.config, inbound)
    return jsonify({"keyword": word, "answered": answered})
