"""Browser side of Web Push: subscribe / unsubscribe, the public VAPID key, and the service worker."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request, send_from_directory
from flask_babel import gettext
from flask_login import current_user, login_required

from app.extensions import limiter
from app.providers.endpoints import EndpointPolicy, EndpointRefused
from app.push import service
from app.unitofwork import commit
from app.web.errors import problem

bp = Blueprint("push", __name__)


def _subscriber_key() -> str:
    # Per user: each subscribe may make the workers POST to a new host, so one account gets a budget.
    return f"push-subscribe:{current_user.get_id() if current_user.is_authenticated else request.remote_addr}"


def _subscribe_limit() -> str:
    return current_app.config["PUSH_SUBSCRIBE_RATE_LIMIT"]


@bp.post("/push/subscriptions")
@limiter.limit(_subscribe_limit, key_func=_subscriber_key, error_message="Too many push subscriptions; try later.")
@login_required
def subscribe():
    """Save the browser's PushSubscription for the signed-in user (JSON {endpoint, keys}).

    400 for a malformed subscription, 422 for an endpoint that is not a push service this server sends
    to, 409 for an endpoint another user subscribed (it stays theirs).
    """
    try:
        policy = EndpointPolicy.from_config(current_app.config)
        subscription = service.parse_subscription(request.get_json(silent=True), policy)
    except service.SubscriptionError as exc:
        return problem(400, str(exc))
    except EndpointRefused as exc:
        return problem(422, str(exc))
    try:
        subscription_id = service.subscribe(
            current_user.id,
            subscription,
            request.user_agent.string or "",
            current_app.config["PUSH_MAX_SUBSCRIPTIONS_PER_USER"],
        )
    except service.EndpointTaken:
        return problem(409, gettext("This endpoint is subscribed by another account on this server."))
    commit()
    return jsonify({"id": subscription_id, "endpoint": subscription.endpoint}), 201


@bp.delete("/push/subscriptions")
@login_required
def unsubscribe():
    """Delete the signed-in user's own subscription for the endpoint in the JSON body."""
    data = request.get_json(silent=True)
    endpoint = data.get("endpoint") if isinstance(data, dict) else None
    if not isinstance(endpoint, str) or not endpoint:
        return problem(400, gettext("The endpoint is missing."))
    if not service.unsubscribe(current_user.id, endpoint):
        return problem(404, gettext("You have no subscription with this endpoint."))
    commit()
    return "", 204


@bp.get("/push/vapid-public-key")
def vapid_public_key():
    """The application server key browsers subscribe with."""
    key = current_app.config["VAPID_PUBLIC_KEY"]
    if not key:
        return problem(404, gettext("Web Push is not configured on this server."))
    return jsonify({"publicKey": key})


@bp.get("/sw.js")
def service_worker():
    """The service worker, from the site root so its scope covers every page."""
    response = send_from_directory(current_app.static_folder, "js/sw.js", mimetype="text/javascript", max_age=0)
    response.headers["Service-Worker-Allowed"] = "/"
    response.headers["Cache-Control"] = "no-cache"
    return response
