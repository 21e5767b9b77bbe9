"""The /ws websocket: the signed-in user's badge, pushed on connect and after every event."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, abort, current_app, request
from flask_babel import gettext
from flask_login import current_user

from app.auth import sessions
from app.extensions import db, limiter, sock
from app.live.publish import CLOSE_SIGNED_OUT
from app.realtime import hub as hub_module
from app.users.queries import session_version
from app.web.i18n import current_language

bp = Blueprint("realtime", __name__)
bp.record_once(lambda state: hub_module.init_app(state.app))

DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def origin_of(url: str) -> str:
    """Return scheme://host[:port] of url, lower-cased, without a default port."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if not scheme or not host:
        return ""
    try:
        port = parts.port
    except ValueError:
        return ""
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}" if port in (None, DEFAULT_PORTS.get(scheme)) else f"{scheme}://{host}:{port}"


def origin_allowed(origin: str | None) -> bool:
    """Return whether a handshake's Origin is BASE_URL's origin or in WS_ALLOWED_ORIGINS."""
    if not origin:
        return False
    allowed = {origin_of(current_app.config["BASE_URL"])}
    allowed.update(origin_of(o) for o in current_app.config.get("WS_ALLOWED_ORIGINS", ()))
    allowed.discard("")
    return origin_of(origin) in allowed


def _connect_key() -> str:
    user_id = current_user.get_id() if current_user.is_authenticated else None
    return f"ws-connect:{user_id or request.remote_addr}"


def _connect_limit() -> str:
    return current_app.config.get("WS_CONNECT_RATE_LIMIT", "120 per minute")


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
