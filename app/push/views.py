"""Browser side of Web Push: subscribe / unsubscribe, the public VAPID key, and the service worker."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request, send_from_directory
from flask_login import current_user, login_required

from app.push import service
from app.unitofwork import commit
from app.web.errors import problem

bp = Blueprint("push", __name__)


def _allow_local_http() -> bool:
    # Production endpoints are https; a local push service (tests, make run) runs on http://127.0.0.1.
    return bool(current_app.config["PUSH_ALLOW_HTTP_ENDPOINTS"])


@bp.post("/push/subscriptions")
@login_required
def subscribe():
    """Save the browser's PushSubscription for the signed-in user (JSON {endpoint, keys})."""
    try:
        subscription = service.parse_subscription(request.get_json(silent=True), _allow_local_http())
    except service.SubscriptionError as exc:
        return problem(400, str(exc))
    subscription_id = service.subscribe(current_user.id, subscription, request.user_agent.string or "")
    commit()
    return jsonify({"id": subscription_id, "endpoint": subscription.endpoint}), 201


@bp.delete("/push/subscriptions")
@login_required
def unsubscribe():
    """Delete the signed-in user's own subscription for the endpoint in the JSON body."""
    data = request.get_json(silent=True)
    endpoint = data.get("endpoint") if isinstance(data, dict) else None
    if not isinstance(endpoint, str) or not endpoint:
        return problem(400, "endpoint is missing")
    if not service.unsubscribe(current_user.id, endpoint):
        return problem(404, "you have no subscription with this endpoint")
    commit()
    return "", 204


@bp.get("/push/vapid-public-key")
def vapid_public_key():
    """The application server key browsers subscribe with."""
    key = current_app.config.get("VAPID_PUBLIC_KEY") or ""
    if not key:
        return problem(404, "Web Push is not configured on this server")
    return jsonify({"publicKey": key})


@bp.get("/sw.js")
def service_worker():
    """The service worker, from the site root so its scope covers every page."""
    response = send_from_directory(current_app.static_folder, "js/sw.js", mimetype="text/javascript", max_age=0)
    response.headers["Service-Worker-Allowed"] = "/"
    response.headers["Cache-Control"] = "no-cache"
    return response
