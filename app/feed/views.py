"""The headless feed under /v1/feed: one member's inbox as JSON for the product's own pages (the bell).

Authenticated by a signed user token (app/user_tokens) as `Authorization: Bearer …`, never a cookie, so no
CSRF token either; cross-origin calls only from FEED_ALLOWED_ORIGINS. Every read and write is the inbox's own
(app/inbox/queries.py and service.py): the same IDOR-safe lookups by (user, id), the same idempotent updates
and the same badge events after the commit.
"""

from __future__ import annotations

from flask import Blueprint, abort, current_app, jsonify, request
from flask_babel import gettext
from werkzeug.exceptions import HTTPException

from app import timezones, user_tokens
from app.clock import db_now
from app.extensions import csrf, limiter
from app.inbox import queries, service
from app.inbox import snooze as snoozing
from app.pagination import Cursor
from app.preferences import queries as preference_queries
from app.preferences import service as preference_service
from app.unitofwork import commit
from app.users.queries import user_by_id
from app.web.errors import problem

bp = Blueprint("feed", __name__, url_prefix="/v1/feed")
csrf.exempt(bp)

PAGE_LIMIT_MAX = 50
CORS_METHODS = "GET, POST, PUT, OPTIONS"
CORS_HEADERS = "Authorization, Content-Type, Accept-Language"
CORS_MAX_AGE = "600"
INVALID_USER_TOKEN = "urn:hato:problem:invalid_user_token"  # noqa: S105 - a problem type URI, not a secret


def _token_messages() -> dict[str, str]:
    return {
        "malformed": gettext("Send a user token as `Authorization: Bearer <token>`."),
        "expired": gettext("The user token has expired; fetch a new one from your backend."),
        "audience": gettext("The user token was made for another Hato (its aud is not this BASE_URL)."),
        "signature": gettext("The user token's signature does not match a live API key with the feed:issue scope."),
        "claims": gettext("The user token lacks a required claim (sub, exp or aud)."),
        "unknown_user": gettext("The user token names no member of this Hato."),
    }


def current_feed_user() -> user_tokens.FeedUser:
    """Return who the request's user token speaks for (verified once per request); TokenError otherwise."""
    if not hasattr(request, "hato_feed_user"):
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            raise user_tokens.TokenError("malformed")
        request.hato_feed_user = user_tokens.verify(token.strip())
    return request.hato_feed_user


def _limit_key() -> str:
    feed_user = getattr(request, "hato_feed_user", None)
    return f"feed-user:{feed_user.user_id}" if feed_user else f"feed-ip:{request.remote_addr}"


limiter.limit(lambda: current_app.config["API_RATE_LIMIT"], key_func=_limit_key)(bp)


@bp.before_request
def guard():
    """Answer a CORS preflight; refuse other origins; authenticate everything else by user token."""
    origin = request.headers.get("Origin")
    if origin is not None and not user_tokens.feed_origin_allowed(origin):
        # No Access-Control-Allow-Origin on the answer: the browser keeps it from the page.
        return problem(403, gettext("This origin is not in FEED_ALLOWED_ORIGINS."))
    if request.method == "OPTIONS":
        return "", 204
    current_feed_user()
    return None


@bp.after_request
def cors_headers(response):
    """Let allowed origins read the answer (bearer tokens only: credentials are never allowed)."""
    origin = request.headers.get("Origin")
    response.headers.add("Vary", "Origin")
    response.headers.setdefault("Cache-Control", "no-store")
    if origin is not None and user_tokens.feed_origin_allowed(origin):
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Allow-Methods"] = CORS_METHODS
        response.headers["Access-Control-Allow-Headers"] = CORS_HEADERS
        response.headers["Access-Control-Max-Age"] = CORS_MAX_AGE
    return response


@bp.errorhandler(user_tokens.TokenError)
def invalid_token(error: user_tokens.TokenError):
    """401 with the reason as a problem document; `code: expired` tells the client to fetch a new token."""
    response = problem(401, _token_messages()[error.code], type=INVALID_USER_TOKEN, code=error.code)
    response.headers["WWW-Authenticate"] = f'Bearer realm="hato-feed", error="invalid_token", code="{error.code}"'
    return response


@bp.errorhandler(HTTPException)
def http_error(error: HTTPException):
    """Every other error of the feed is a problem document too (never an HTML page)."""
    own = error.code in (400, 404, 422) and error.description != type(error).description
    detail = error.description if own else None
    response = problem(error.code or 500, detail or error.name)
    for name, value in error.get_headers() or ():
        if name.lower() == "retry-after":
            response.headers[name] = value
    return response


def _user_id() -> int:
    return current_feed_user().user_id


def _json_body() -> dict:
    body = request.get_json(silent=True)
    if body is None and request.content_length:
        _refuse(400, gettext("The body must be a JSON object."))
    if body is not None and not isinstance(body, dict):
        _refuse(400, gettext("The body must be a JSON object."))
    return body or {}


def _refuse(status: int, detail: str):
    """Stop with a problem document (400, 404, 422) whose detail says why."""
    abort(status, detail)


def _time(value) -> str | None:
    return value.isoformat() if value is not None else None


def _link(path: str | None) -> str | None:
    return current_app.config["BASE_URL"].rstrip("/") + path if path else None


def notification_json(row) -> dict:
    """One notification as the feed shows it."""
    return {
        "id": row["id"],
        "type": row["type"],
        "title": row["title"],
        "body": row["body"],
        "link": _link(row["link_path"]),
        "unread": row["unread"],
        "seen": row["seen"],
        "read_at": _time(row["read_at"]),
        "archived_at": _time(row["archived_at"]),
        "snoozed_until": _time(row["snoozed_until"]),
        "created_at": _time(row["created_at"]),
        "mutable": row["mutable"],
        "muted": row["muted"],
    }


def announcement_json(row) -> dict:
    """One active announcement as the feed shows it."""
    return {
        "id": row["id"],
        "title": row["title"],
        "body": row["body"],
        "body_format": row["body_format"],
        "unread": row["unread"],
        "seen": row["seen"],
        "published_at": _time(row["published_at"]),
    }


def _counts() -> dict:
    counts = queries.badge_counts(_user_id())
    return {"unread": counts.unread, "unseen": counts.unseen, "badge": counts.shown()}


def _own_notification(notification_id: int):
    return queries.notification_for(_user_id(), notification_id) or _refuse(
        404, gettext("There is no notification with this id.")
    )


def _done(notification_id: int | None = None):
    """Commit once (the user's tabs and bells hear of it after), then answer with the row and the counts."""
    commit()
    body = {"counts": _counts()}
    if notification_id is not None:
        row = queries.notification_for(_user_id(), notification_id)
        body["notification"] = notification_json(row) if row is not None else None
    return jsonify(body)


# --- reads ----------------------------------------------------------------------------------------


@bp.get("")
def page():
    """One keyset page of notifications (newest first) and, on the first page, the active announcements."""
    filter_name = request.args.get("filter", "all")
    if filter_name not in queries.FILTERS:
        _refuse(400, gettext("Unknown filter: use all, unread, archived or snoozed."))
    cursor = request.args.get("cursor") or None
    if cursor and Cursor.decode(cursor) is None:
        _refuse(400, gettext("That page link is not valid any more. Go back to the newest notifications."))
    try:
        limit = min(max(int(request.args.get("limit", 20)), 1), PAGE_LIMIT_MAX)
    except ValueError:
        limit = 20
    user_id = _user_id()
    result = queries.notification_page(user_id, filter_name, cursor, limit)
    first = cursor is None and filter_name != "archived"
    announcements = queries.active_announcements(user_id) if first else []
    return jsonify(
        {
            "notifications": [notification_json(row) for row in result.rows],
            "announcements": [announcement_json(row) for row in announcements],
            "next_cursor": result.next_cursor,
            "counts": _counts(),
        }
    )


@bp.get("/counts")
def counts():
    """The member's two badges, unread and unseen, and the one BADGE_COUNTS shows."""
    return jsonify(_counts())


# --- writes (each idempotent: a repeat changes nothing and answers the same) ---------------------


@bp.post("/notifications/<int:notification_id>/read")
def mark_read(notification_id: int):
    """Mark one notification read (the first read_at stays)."""
    _own_notification(notification_id)
    service.mark_read(_user_id(), notification_id)
    return _done(notification_id)


@bp.post("/notifications/<int:notification_id>/archive")
def archive(notification_id: int):
    """Archive one notification (it becomes read)."""
    _own_notification(notification_id)
    service.archive(_user_id(), notification_id)
    return _done(notification_id)


@bp.post("/notifications/<int:notification_id>/unarchive")
def unarchive(notification_id: int):
    """Move an archived notification back to the inbox."""
    _own_notification(notification_id)
    service.unarchive(_user_id(), notification_id)
    return _done(notification_id)


@bp.post("/notifications/<int:notification_id>/snooze")
def snooze(notification_id: int):
    """Read and hide a notification until {"choice": "hour"|"tomorrow"|"monday"} or {"until": local date-time}."""
    row = _own_notification(notification_id)
    if row["archived_at"]:
        _refuse(422, gettext("Move it back to the inbox before snoozing it."))
    body = _json_body()
    try:
        until = snoozing.until_from_form(body, db_now(), timezones.user_zone(user_by_id(_user_id())))
    except snoozing.SnoozeError as exc:
        _refuse(422, str(exc))
    service.snooze(_user_id(), notification_id, until)
    return _done(notification_id)


@bp.post("/notifications/<int:notification_id>/unsnooze")
def unsnooze(notification_id: int):
    """Wake a snoozed notification now."""
    _own_notification(notification_id)
    service.unsnooze(_user_id(), notification_id)
    return _done(notification_id)


@bp.post("/notifications/<int:notification_id>/mute")
def mute(notification_id: int):
    """Mute the notification's thread (later ones arrive read and hidden)."""
    row = _own_notification(notification_id)
    if not row["mutable"]:
        _refuse(422, gettext("This notification is not part of a thread that can be muted."))
    service.mute(_user_id(), notification_id)
    return _done(notification_id)


@bp.post("/announcements/<int:announcement_id>/read")
def read_announcement(announcement_id: int):
    """Mark one active announcement read."""
    if queries.announcement_for(_user_id(), announcement_id) is None:
        _refuse(404, gettext("There is no announcement with this id."))
    service.read_announcement(_user_id(), announcement_id)
    return _done()


@bp.post("/read-all")
def read_all():
    """Mark every notification and active announcement read."""
    result = service.read_all(_user_id())
    commit()
    return jsonify({"changed": result.changed, "counts": _counts()})


@bp.post("/seen")
def seen():
    """Record that the member looked at their feed now (the unseen badge goes back to 0)."""
    service.record_seen(_user_id())
    return _done()


# --- preferences ------------------------------------------------------------------------------------


def _preferences() -> dict:
    rows = preference_queries.matrix(_user_id())
    return {
        "types": [
            {
                "type": row.type,
                "label": row.label,
                "description": row.description,
                "mandatory": row.mandatory,
                "channels": {channel: cell.send for channel, cell in row.cells.items()},
            }
            for row in rows
        ]
    }


@bp.get("/preferences")
def preferences():
    """The member's type × channel matrix (mandatory types are shown, locked)."""
    return jsonify(_preferences())


@bp.put("/preferences")
def set_preference():
    """Turn one (type, channel) on or off: {"type": …, "channel": …, "enabled": true|false}."""
    body = _json_body()
    type_, channel, enabled = body.get("type"), body.get("channel"), body.get("enabled")
    if not isinstance(type_, str) or not isinstance(channel, str) or not isinstance(enabled, bool):
        _refuse(422, gettext("Send type and channel as strings and enabled as true or false."))
    try:
        preference_service.set_preference(_user_id(), type_, channel, enabled)
    except preference_service.MandatoryTypeError as exc:
        _refuse(422, str(exc))
    except preference_service.PreferenceError as exc:
        _refuse(422, str(exc))
    commit()
    return jsonify(_preferences())
