"""The /ws websocket (the signed-in user's badge) and /v1/feed/socket (a user token's counts, as JSON)."""

from __future__ import annotations

import json

from flask import Blueprint, abort, current_app, request
from flask_babel import gettext
from flask_login import current_user

from app import user_tokens
from app.auth import sessions
from app.extensions import db, limiter, sock
from app.i18n import language_or_default
from app.links import origin_of
from app.live.publish import CLOSE_SIGNED_OUT
from app.realtime import connection
from app.realtime import hub as hub_module
from app.users.queries import session_version
from app.web.documented import documented
from app.web.i18n import current_language

bp = Blueprint("realtime", __name__)
bp.record_once(lambda state: hub_module.init_app(state.app))


def origin_allowed(origin: str | None) -> bool:
    """Return whether a handshake's Origin is BASE_URL's origin or in WS_ALLOWED_ORIGINS."""
    if not origin:
        return False
    allowed = {origin_of(current_app.config["BASE_URL"])}
    allowed.update(origin_of(o) for o in current_app.config["WS_ALLOWED_ORIGINS"])
    allowed.discard("")
    return origin_of(origin) in allowed


def _connect_key() -> str:
    user_id = current_user.get_id() if current_user.is_authenticated else None
    return f"ws-connect:{user_id or request.remote_addr}"


def _connect_limit() -> str:
    return current_app.config["WS_CONNECT_RATE_LIMIT"]


# A blueprint limit is checked in the limiter's before_request, i.e. before the handshake completes.
limiter.limit(_connect_limit, key_func=_connect_key)(bp)


@bp.before_request
def guard_handshake():
    """Refuse the upgrade with a plain HTTP error (never a 101) unless same-origin and signed in."""
    if request.headers.get("Upgrade", "").lower() != "websocket":
        abort(400, gettext("This endpoint only speaks WebSocket."))
    # Browsers send cookies on cross-site websocket handshakes; Origin is the only cross-site signal.
    if not origin_allowed(request.headers.get("Origin")):
        abort(403)
    if not current_user.is_authenticated:
        abort(403)
    # Decline permessage-deflate (simple-websocket accepts whatever is offered): its zlib state costs
    # ~90 KB of RSS per socket (measured: 165 vs 75 KB) to save ~150 bytes on a badge frame.
    request.environ.pop("HTTP_SEC_WEBSOCKET_EXTENSIONS", None)


@sock.route("/ws", bp=bp)
def socket(ws):
    """Send the current badge, then a fresh one after every event for this user, until the socket closes."""
    hub = hub_module.hub_for(current_app)
    user_id = int(current_user.get_id())
    # Frames speak the language this request was served in: the user's saved one, else the browser's.
    conn = hub.connect(
        user_id, ws, sid=sessions.current_sid(), ver=sessions.current_version(), language=current_language()
    )
    try:
        # The handshake checked the session; one ended since then published its 4001 before this socket
        # was registered to hear it, so look again now that it is.
        if session_version(user_id) != conn.ver:
            conn.close(CLOSE_SIGNED_OUT)
            return
        if hub.greet(conn):
            hub.serve(conn)
    finally:
        db.session.remove()
        hub.disconnect(conn)


# --- the feed socket: embedded pages (the bell), authenticated by a user token ---------------------

# The client sends {"type": "auth", "token": …} first (never in the URL, which servers and proxies log).
FEED_AUTH_SECONDS = 10.0
FEED_MESSAGE_MAX = 4096

feed_bp = Blueprint("feed_socket", __name__)


def _feed_connect_key() -> str:
    return f"feed-ws-connect:{request.remote_addr}"


limiter.limit(lambda: current_app.config["FEED_CONNECT_RATE_LIMIT"], key_func=_feed_connect_key)(feed_bp)


@feed_bp.before_request
def guard_feed_handshake():
    """Refuse the upgrade unless it is a websocket from one of FEED_ALLOWED_ORIGINS (no cookie is looked at)."""
    if request.headers.get("Upgrade", "").lower() != "websocket":
        abort(400, gettext("This endpoint only speaks WebSocket."))
    if not user_tokens.feed_origin_allowed(request.headers.get("Origin")):
        abort(403)
    request.environ.pop("HTTP_SEC_WEBSOCKET_EXTENSIONS", None)  # as /ws: no permessage-deflate


def _auth_message(raw) -> tuple[str, str | None]:
    """Return (token, language) of a client's auth message; TokenError("malformed") for anything else."""
    try:
        message = json.loads(raw) if isinstance(raw, str | bytes) and len(raw) <= FEED_MESSAGE_MAX else None
    except ValueError:
        message = None
    if not isinstance(message, dict) or message.get("type") != "auth" or not isinstance(message.get("token"), str):
        raise user_tokens.TokenError("malformed")
    language = message.get("lang")
    return message["token"], language if isinstance(language, str) else None


def _close_code(error: user_tokens.TokenError) -> int:
    return connection.CLOSE_TOKEN_EXPIRED if error.code == "expired" else connection.CLOSE_TOKEN_REFUSED


def _reauthenticate(conn, raw) -> None:
    """A fresh token for the same member extends the socket's life; anything else closes it."""
    try:
        token, _ = _auth_message(raw)
        try:
            feed_user = user_tokens.verify(token)
        finally:
            db.session.remove()  # never hold a database connection while the socket idles
    except user_tokens.TokenError as exc:
        conn.close(_close_code(exc))
        return
    if feed_user.user_id != conn.user_id or feed_user.tenant_id != conn.tenant_id:  # same member, same scope
        conn.close(connection.CLOSE_TOKEN_REFUSED)
        return
    conn.expires_at = feed_user.expires_at
    conn.push(json.dumps({"type": "auth", "expires_at": feed_user.expires_at}))


@sock.route("/v1/feed/socket", bp=feed_bp)
@documented(
    "feedSocket",
    "The member's counts, live (a WebSocket)",
    {101: None},
    errors=(400, 403, 429),
    tags=("feed",),
    auth=None,
    description="Open a WebSocket from a page of FEED_ALLOWED_ORIGINS (anything but a WebSocket upgrade: 400), "
    'then send `{"type": "auth", "token": <user token>, "lang": <optional language>}` within '
    f"{FEED_AUTH_SECONDS:.0f} seconds (at most {FEED_MESSAGE_MAX:,} bytes). The server sends the counts as JSON "
    "whenever they change; a fresh auth message before the token expires keeps the socket open. Handshakes "
    "are limited per client address (FEED_CONNECT_RATE_LIMIT).",
)
def feed_socket(ws):
    """Read the user token from the first message, then serve JSON counts like /ws until expiry or close."""
    try:
        raw = ws.receive(timeout=FEED_AUTH_SECONDS)
        token, language = _auth_message(raw)
        feed_user = user_tokens.verify(token)
    except user_tokens.TokenError as exc:
        ws.close(_close_code(exc), connection.CLOSE_MESSAGES[_close_code(exc)])
        return
    finally:
        db.session.remove()
    hub = hub_module.hub_for(current_app)
    language = language_or_default(language, current_app.config["DEFAULT_LOCALE"]) if language else None
    conn = hub.connect(
        feed_user.user_id,
        ws,
        language=language or current_language(),
        feed=(feed_user.expires_at, _reauthenticate),
        tenant_id=feed_user.tenant_id,
    )
    try:
        if hub.greet(conn):
            hub.serve(conn)
    finally:
        db.session.remove()
        hub.disconnect(conn)
