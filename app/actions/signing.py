"""Signed action links (e-mail and push): the URL names the member, the notification and the action, and expires.

itsdangerous, as the unsubscribe links (app/delivery/unsubscribe.py), but timed: ACTION_LINK_MAX_AGE_SECONDS.
A link only leads to a confirm page (GET); the action happens on its POST, so a mail scanner that fetches
every link acts on nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

SALT = "hato.action.v1"


@dataclass(frozen=True)
class ActionTarget:
    """The member, notification and named action a link stands for."""

    user_id: int
    notification_id: int
    name: str


class Expired(Exception):
    """The link was genuine but is older than ACTION_LINK_MAX_AGE_SECONDS."""


def _serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.config["SECRET_KEY"], salt=SALT)


def make_token(user_id: int, notification_id: int, name: str) -> str:
    """The opaque, signed and dated token of (member, notification, action)."""
    return _serializer().dumps([int(user_id), int(notification_id), str(name)])


def read_token(token: str) -> ActionTarget | None:
    """The target of a token; None when forged, damaged or malformed; raises Expired when too old."""
    try:
        payload = _serializer().loads(token, max_age=current_app.config["ACTION_LINK_MAX_AGE_SECONDS"])
    except SignatureExpired:
        raise Expired() from None
    except BadSignature:
        return None
    ok = (
        isinstance(payload, list)
        and len(payload) == 3
        and all(isinstance(v, int) and not isinstance(v, bool) for v in payload[:2])
        and isinstance(payload[2], str)
    )
    return ActionTarget(*payload) if ok else None


def action_url(base_url: str, user_id: int, notification_id: int, name: str) -> str:
    """The absolute (BASE_URL) link to the action's confirm page, for e-mails and pushes."""
    return f"{base_url.rstrip('/')}/actions/{make_token(user_id, notification_id, name)}"
