"""Signed one-click unsubscribe tokens (RFC 8058): the URL itself names the user and the type."""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app
from itsdangerous import BadSignature, URLSafeSerializer

SALT = "hato.unsubscribe.v1"


@dataclass(frozen=True)
class UnsubscribeTarget:
    """Whose e-mail for which notification type a token turns off."""

    user_id: int
    type: str


def _serializer() -> URLSafeSerializer:
    return URLSafeSerializer(current_app.config["SECRET_KEY"], salt=SALT)


def make_token(user_id: int, type_: str) -> str:
    """Return the opaque, HMAC-signed token for (user, type); it does not expire (mail lives long)."""
    return _serializer().dumps([int(user_id), str(type_)])


def read_token(token: str) -> UnsubscribeTarget | None:
    """Return the target of a token, or None when it is forged, damaged or malformed."""
    try:
        payload = _serializer().loads(token)
    except BadSignature:
        return None
    if (
        not isinstance(payload, list)
        or len(payload) != 2
        or not isinstance(payload[0], int)
        or isinstance(payload[0], bool)
        or not isinstance(payload[1], str)
    ):
        return None
    return UnsubscribeTarget(user_id=payload[0], type=payload[1])


def unsubscribe_url(base_url: str, user_id: int, type_: str) -> str:
    """Return the absolute https (BASE_URL) link that goes into List-Unsubscribe and the footer."""
    return f"{base_url}/unsubscribe/{make_token(user_id, type_)}"
