"""The JSON API for product services under /v1: bearer API key, application/json, problem+json errors.

Problem documents speak the caller's language (Accept-Language: their title and detail, and the field
messages); type, status, scope, field names and error codes are for programs and never change with it.
The session cookie is never accepted as authentication (so no CSRF token either); every limit
is per API key, and every endpoint declares the scope its key needs (auth.requires). Views parse,
call one service, store their response for the Idempotency-Key and commit once; the Redis work the
services registered follows the commit (app/unitofwork.py).
"""

from __future__ import annotations

import logging
from functools import partial

from flask import Blueprint, current_app, jsonify, request
from flask_babel import gettext, ngettext

from app.actions import service as actions
from app.api import (
    auth,
    channel_data,
    members,
    notification_schemas,
    openapi,
    quotas,
    ratelimit,
    responses,
    schemas,
    tenants,
    topics,
    workflows,
)
from app.api.idempotency import idempotent, json_response, store
from app.api.schemas import ApiError
from app.clock import db_now
from app.extensions import csrf, limiter
from app.notify.queries import notification_with_deliveries
from app.notify.schedule import cancel, schedule
from app.notify.service import NotifyError, OutsideTenant, notify
from app.tenants import service as tenant_service
from app.unitofwork import commit
from app.users import service as users
from app.web import bodies
from app.web.documented import body_limit_setting, documented
from app.web.errors import problem

log = logging.getLogger(__name__)

bp = Blueprint("api", __name__, url_prefix="/v1")
csrf.exempt(bp)

PUBLIC_ENDPOINTS = frozenset({"api.ping", "api.openapi_document"})


def _public() -> bool:
    return request.endpoint in PUBLIC_ENDPOINTS


# The API_RATE_LIMIT per key is counted by guard() (app/api/ratelimit.py), not by Flask-Limiter's hooks.
limiter.request_filter(lambda: request.blueprint == bp.name)
bp.record_once(lambda state: ratelimit.skip_extension_hooks(state.app, bp.name))


@bp.before_request
def guard():
    """Count the call against its key's rate limit, authenticate, then refuse an oversized body unread."""
    if _public():
        return None
    view = current_app.view_functions.get(request.endpoint)
    if auth.current_key() is not None and getattr(view, "charges_quota", False):
        ratelimit.defer(auth.rate_limit_key())  # counted in the quotas' round trip (app/api/ratelimit.py)
    else:
        ratelimit.check(auth.rate_limit_key())  # first: unauthenticated calls count against their address
    if auth.current_key() is None:
        raise ApiError(
            401,
            gettext("Send a valid API key as `Authorization: Bearer hato_…`."),
            headers={"WWW-Authenticate": 'Bearer realm="hato"'},
        )
    bodies.limit_body(current_app.config[body_limit_setting(view)])
    return None


@bp.after_request
def api_headers(response):
    """No caching of API answers; the RateLimit-* headers of the call's rate limit; a failed call's quota back."""
    response.headers.setdefault("Cache-Control", "no-store")
    ratelimit.settle_deferred()
    return ratelimit.add_headers(quotas.settle(response))


@bp.errorhandler(ApiError)
def api_error(error: ApiError):
    """Answer with the problem document the error describes."""
    response = problem(error.status, error.detail, **error.extra)
    response.headers.update(error.headers)
    return response


bp.register_error_handler(bodies.BadInput, workflows.refused)


@bp.errorhandler(NotifyError)
def unknown_type_or_recipients(error: NotifyError):
    """422 naming the unknown type and recipients (nothing was written)."""
    errors = []
    unknown = len(error.unknown_recipients)
    if error.unknown_type is not None:
        message = gettext("there is no notification type %(type)s", type=repr(error.unknown_type))
        errors.append({"field": "type", "message": message})
    if unknown:
        message = gettext("unknown recipients: create them with PUT /v1/users/{id}")
        errors.append({"field": "recipients", "message": message})
    if error.unknown_type is not None and unknown:
        detail = ngettext(
            "Nothing was sent: unknown notification type %(type)s; %(num)d unknown recipient.",
            "Nothing was sent: unknown notification type %(type)s; %(num)d unknown recipients.",
            unknown,
            type=repr(error.unknown_type),
        )
    elif error.unknown_type is not None:
        detail = gettext("Nothing was sent: unknown notification type %(type)s.", type=repr(error.unknown_type))
    else:
        detail = ngettext(
            "Nothing was sent: %(num)d unknown recipient.", "Nothing was sent: %(num)d unknown recipients.", unknown
        )
    extra = {"unknown_recipients": error.unknown_recipients} if error.unknown_recipients else {}
    return problem(422, detail, errors=errors, **extra)


@bp.errorhandler(OutsideTenant)
def outside_tenant(error: OutsideTenant):
    """422 naming the recipients who are not the tenant's members (nothing was written)."""
    detail = ngettext(
        "Nothing was sent: %(num)d recipient is not a member of this tenant.",
        "Nothing was sent: %(num)d recipients are not members of this tenant.",
        len(error.outsiders),
    )
    errors = [{"field": "tenant", "message": gettext("these recipients are not its members: add them with "
                                                     "PUT /v1/users/{id} (tenants)")}]  # fmt: skip
    return problem(422, detail, errors=errors, outside_tenant=error.outsiders)


@bp.errorhandler(tenant_service.UnknownTenants)
def unknown_tenants(error: tenant_service.UnknownTenants):
    """422 naming the tenant keys that name no tenant (nothing was changed)."""
    errors = [{"field": "tenants", "message": gettext("there is no tenant %(key)s", key=repr(key))}
              for key in error.keys]  # fmt: skip
    return problem(422, str(error), errors=errors, unknown_tenants=error.keys)


@bp.errorhandler(users.UserNotFound)
def user_not_found(error):
    """404 for an unknown external id."""
    return problem(404, gettext("There is no user with this external id."))


@bp.errorhandler(users.NotAMember)
def not_a_member(error):
    """403: operator accounts are not managed through the API."""
    return problem(403, gettext("This external id belongs to an operator account, which the API cannot manage."))


@bp.errorhandler(users.EmailTaken)
def email_taken(error):
    """409: the address belongs to another user."""
    return problem(
        409,
        gettext("Another user already has this e-mail address."),
        errors=[{"field": "email", "message": gettext("already used by another user")}],
    )


@bp.get("/ping")
@documented("ping", "Is the API process up (no key needed)", {200: responses.Ping}, tags=("meta",), auth=None)
def ping():
    """Liveness of the API process, no database or key involved (the benchmark's ceiling)."""
    return jsonify(ok=True)


@bp.get("/openapi.json")
@documented(
    "getOpenApiDocument",
    "This document: every /v1 operation, its models and this server's limits",
    {200: responses.OpenApiOut},
    tags=("meta",),
    auth=None,
)
def openapi_document():
    """The OpenAPI 3.1 document, built from the routes and the models that validate requests (always English)."""
    return jsonify(openapi.spec(current_app._get_current_object()))


@bp.post("/notifications")
@documented(
    "createNotifications",
    "Send a notification to 1-1,000 recipients, or to a topic's followers",
    {202: (responses.NotificationAccepted, responses.NotificationScheduled, topics.TopicNotificationAccepted)},
    description="Writes one notification per recipient (a repeat of the same dedupe key is not an "
    "error) and its e-mail/push deliveries as the recipient's preferences allow. Unknown "
    "type or recipients: 422 and nothing is written. With a future `send_at` nothing is written "
    "but the schedule: the answer is a NotificationScheduled (`status: scheduled`); at `send_at` the "
    "notifications appear and their deliveries start. A recipient who muted the `group_key` thread "
    "gets the notification stored read and hidden, and its e-mail/push skipped (reason `muted`). "
    "The type's timing (set in the console) applies to e-mail/push: with `escalate_after` they wait "
    "that long and are skipped (reason `read` / `seen`) if the notification was read (or seen) by "
    "then; `skip_when_online` skips them (reason `online`) while a tab of the user answers (acks); with "
    "`push_when_offline` the push waits REALTIME_ACK_TIMEOUT_SECONDS for a tab to ack the notification's frame "
    "and is skipped (reason `seen_in_app`) if one did; a "
    "frequency cap sends the e-mail excess to the user's next digest (reason `digested`) and skips the "
    "push excess (reason `capped`); e-mail of a type the user gets as an hourly or daily digest is "
    "skipped with reason `digested` and listed in that digest. With `topic` instead of recipients every follower "
    "of the topic but the `actor` and the `exclude` ids gets it, written by a background fanout in batches with "
    "the same rules (preferences, mutes, workflows); the answer is a TopicNotificationAccepted naming the fanout "
    "(GET /v1/fanouts/{id} reports its progress); with a `tenant` too, only the followers who are the tenant's "
    "members get it, each row carrying the tenant. The same Idempotency-Key never fans out twice, and the dedupe "
    "key keeps a follower from getting it twice. The key's and the tenant's quotas (set in the console: requests per "
    "second with a burst, notifications per UTC day, one per recipient or follower) are counted before anything "
    "is committed: over one, the answer is 429 `urn:hato:problem:quota_exceeded` whose `limit` (`rate` or "
    "`daily`) and `subject` (`api_key` or `tenant`) name it, with Retry-After, RateLimit-* and RateLimit-Policy "
    "headers of that limit, and nothing is written; a call that fails gives its notifications back.",
)
@auth.requires("notifications:write")
@idempotent(notification_schemas.NotificationIn)
@quotas.charges
def create_notifications(payload: notification_schemas.NotificationIn):
    """Write one notification per recipient, or record a topic's fanout; deliveries and badge events follow the
    commit."""
    tenant = tenants.sending_tenant(payload.tenant)
    actions = payload.stored_actions()  # a 422 before the quota is charged or anything written
    recipients = payload.recipient_ids() if payload.topic is None else []
    if payload.topic is None:
        quotas.charge(len(recipients), tenant.quota if tenant else None)  # before any write: over a quota, none
    dedupe_key = payload.effective_dedupe_key()
    content = {
        "type_": payload.type,
        "title": payload.title,
        "body": payload.body,
        "link_path": payload.link,
        "data": payload.data,
        "dedupe_key": dedupe_key,
        "api_key_id": auth.current_key().id,
        "group_key": payload.group_key,
        "cancellation_key": payload.cancellation_key,
        "channels": payload.route(),
        "channel_mode": payload.channel_mode,
    }
    send_at = schemas.parse_send_at(payload.send_at) if payload.send_at is not None else None
    # A send_at in the past (or now) means now, by the database's clock.
    if payload.topic is not None:
        # Its followers (with a tenant, those who are its members) counted against the quotas before a write.
        admit = partial(quotas.charge, tenant_quota=tenant.quota if tenant else None)
        body = topics.create_topic_fanout(payload, content, admit=admit, tenant_id=tenant and tenant.id)
    elif send_at is not None and send_at > db_now():
        scheduled = schedule(recipients, send_at=send_at, **content, tenant_id=tenant and tenant.id)
        body = responses.NotificationScheduled.of(payload.type, dedupe_key, send_at, scheduled)
    else:
        result = notify(recipients, **content, actor=payload.aggregation_actor(), tenant_id=tenant and tenant.id,
                        actions=actions)  # fmt: skip
        body = responses.NotificationAccepted.of(payload.type, dedupe_key, result)
    response = store(json_response(202, body))
    commit()
    return response


@bp.delete("/cancellations/<cancellation_key>")
@documented(
    "cancelNotifications",
    "Cancel what has not happened yet under a cancellation key",
    {200: responses.CancellationOut},
    description="For the notifications this API key sent with this `cancellation_key`: scheduled ones "
    "not yet sent are removed, pending e-mail/push deliveries and waiting escalations become skipped "
    "(reason `cancelled`). Other keys' notifications are never touched. A repeat answers zeros.",
)
@auth.requires("notifications:write")
@idempotent()
def cancel_notifications(cancellation_key: str):
    """Cancel what has not happened yet of this API key's notifications under the cancellation key."""
    key = schemas.validate_cancellation_key(cancellation_key)
    cancelled = cancel(key, api_key_id=auth.current_key().id)
    out = responses.CancellationOut(
        cancellation_key=key,
        scheduled=cancelled.scheduled,
        deliveries=cancelled.deliveries,
        escalations=cancelled.escalations,
    )
    response = store(json_response(200, out))
    commit()
    return response


@bp.get("/notifications/<int:notification_id>")
@documented(
    "getNotification",
    "A notification and its per-channel delivery state",
    {200: responses.NotificationOut},
    errors=(404,),
    description="Only the API key that created the notification can read it; for any other key the "
    "answer is 404, as if the id did not exist.",
)
@auth.requires("notifications:read")
def get_notification(notification_id: int):
    """One notification this key created, with its per-channel delivery state."""
    # Another key's row answers exactly like a missing one: ids are a sequence, and 403 would confirm them.
    row = notification_with_deliveries(notification_id, api_key_id=auth.current_key().id)
    if row is None:
        raise ApiError(404, gettext("There is no notification with this id."))
    return json_response(200, responses.NotificationOut.model_validate(row))


@bp.patch("/notifications/<int:notification_id>/actions/<action_name>")
@documented(
    "answerAction",
    "Answer a member's named action with the state its button shows",
    {200: responses.ActionStateOut},
    errors=(404,),
    description="After a `notification.action` event (or before, to close the button unsent), set what the "
    "button shows, such as Approved; the member's inbox and bell show it instead of the button. A repeat "
    "replaces the state. Only the API key that created the notification may answer; for any other key, or a "
    "notification without that action, the answer is 404.",
)
@auth.requires("notifications:write")
@bodies.takes_json(notification_schemas.ActionStateIn)
def answer_action(notification_id: int, action_name: str, payload: notification_schemas.ActionStateIn):
    """Record the product's state for one named action of a notification this key created."""
    name = notification_schemas.validate_action_name(action_name)
    row = actions.answer(auth.current_key().id, notification_id, name, payload.state)
    if row is None:
        raise ApiError(404, gettext("There is no notification with this id and action."))
    commit()
    return json_response(200, responses.ActionStateOut.model_validate(dict(row)))


# The routes of the API's other modules join this blueprint.
for _rule, _method, _view in (
    *members.ROUTES,
    *channel_data.ROUTES,
    *workflows.ROUTES,
    *tenants.ROUTES,
    *topics.ROUTES,
):
    bp.add_url_rule(_rule, view_func=_view, methods=[_method])
