"""hato-client: Hato's /v1 API from Python, sync (Hato) and async (AsyncHato), on httpx."""

from hato_client import models
from hato_client._base import VERSION as __version__
from hato_client._base import Retry
from hato_client._client import AsyncHato, Hato
from hato_client.errors import (
    APIConnectionError,
    AuthenticationError,
    BadRequest,
    Conflict,
    HatoError,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServerError,
    ValidationError,
)
from hato_client.tokens import sign_user_token
from hato_client.webhooks import WebhookVerificationError, verify_webhook

__all__ = [
    "APIConnectionError",
    "AsyncHato",
    "AuthenticationError",
    "BadRequest",
    "Conflict",
    "Hato",
    "HatoError",
    "NotFound",
    "PermissionDenied",
    "RateLimited",
    "Retry",
    "ServerError",
    "ValidationError",
    "WebhookVerificationError",
    "__version__",
    "models",
    "sign_user_token",
    "verify_webhook",
]
