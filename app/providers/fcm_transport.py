"""What one worker process shares for FCM: the OAuth access token, the kept-alive HTTP client, the send pool.

The access token comes from google-auth: the service-account key signs an RS256 JWT assertion that is
POSTed to the key's own token_uri (grant_type jwt-bearer). google-auth counts a token as valid until
3¾ minutes before it expires; one credentials object per process, behind a lock, so however many
threads send, one of them refreshes and the others wait for its token. Every HTTP request trusts
FCM_CA_FILE instead of the system's CAs when it is set (the token request too). A forked child makes
its own of everything: the parent's TLS connections and threads are not the child's to use.
"""

from __future__ import annotations

import os
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import requests
from google.auth import exceptions as auth_errors
from google.auth.transport.requests import Request
from google.oauth2 import service_account

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
# Google's front ends keep an idle connection for minutes; the engine calls again within seconds.
KEEPALIVE_SECONDS = 120.0


class TokenRefused(Exception):
    """The token endpoint refused the assertion (or the key cannot be used): the configuration is wrong."""


class TokenUnavailable(Exception):
    """No access token now (the token endpoint did not answer, or answered with a retryable error)."""


@dataclass(frozen=True)
class FcmSettings:
    """The settings one process's shared FCM state is made for."""

    credentials_file: str
    api_base: str
    ca_file: str
    concurrency: int
    timeout: float


class _TokenRequest(Request):
    """google-auth's requests transport with FCM_TIMEOUT instead of its 120 s default, trusting FCM_CA_FILE."""

    def __init__(self, session: requests.Session, timeout: float, ca_file: str) -> None:
        super().__init__(session)
        self.timeout = timeout
        # Per request, not session.verify: requests lets REQUESTS_CA_BUNDLE override a session's bundle.
        self.verify = ca_file or True

    def __call__(self, url, method="GET", body=None, headers=None, timeout=None, **kwargs):
        kwargs.setdefault("verify", self.verify)
        return super().__call__(url, method, body, headers, timeout=timeout or self.timeout, **kwargs)


class FcmTransport:
    """The access token, HTTP client and send pool of one FCM configuration in this process."""

    def __init__(self, settings: FcmSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._credentials: service_account.Credentials | None = None
        self._token_request = _TokenRequest(requests.Session(), settings.timeout, settings.ca_file)
        context = ssl.create_default_context(cafile=settings.ca_file or None)
        self.client = httpx.Client(
            verify=context,
            timeout=settings.timeout,
            limits=httpx.Limits(
                max_connections=None,  # in flight: the pool below plus the engine's lanes, each one request
                max_keepalive_connections=settings.concurrency,
                keepalive_expiry=KEEPALIVE_SECONDS,
            ),
        )
        self.pool = ThreadPoolExecutor(settings.concurrency, thread_name_prefix="hato-fcm")

    def close(self) -> None:
        """End the kept-alive connections and the pool's threads."""
        self.client.close()
        self._token_request.session.close()
        self.pool.shutdown(wait=False)

    @property
    def project_id(self) -> str:
        """The Firebase project of the key (projects/<id>/messages:send); raises TokenRefused."""
        with self._lock:
            return self._load().project_id

    def token(self, stale: str | None = None) -> str:
        """A valid access token; with stale (the token FCM just refused), a new one unless another thread got it.

        Raises TokenRefused or TokenUnavailable.
        """
        with self._lock:
            credentials = self._load()
            if not credentials.valid or (stale is not None and credentials.token == stale):
                try:
                    credentials.refresh(self._token_request)
                except auth_errors.RefreshError as exc:
                    if getattr(exc, "retryable", False):
                        raise TokenUnavailable(f"token endpoint: {exc}") from exc
                    raise TokenRefused(f"token endpoint refused the service account's assertion: {exc}") from exc
                except auth_errors.TransportError as exc:
                    raise TokenUnavailable(f"token endpoint unreachable: {exc}") from exc
                except OSError as exc:  # requests lets a CA bundle it cannot read through unwrapped
                    raise TokenRefused(f"token endpoint: {exc}") from exc
            return credentials.token

    def _load(self) -> service_account.Credentials:
        if self._credentials is None:
            try:
                self._credentials = service_account.Credentials.from_service_account_file(
                    self.settings.credentials_file, scopes=[SCOPE]
                )
            except (OSError, ValueError, KeyError) as exc:  # config.check() reads it at start; it changed since
                raise TokenRefused(f"FCM_CREDENTIALS_FILE cannot be used: {type(exc).__name__}: {exc}") from exc
        return self._credentials


_transports: dict[FcmSettings, FcmTransport] = {}
_pid = os.getpid()
_transports_lock = threading.Lock()


def transport_for(settings: FcmSettings) -> FcmTransport:
    """This process's transport for settings (made on first use; a forked child makes its own)."""
    global _pid
    with _transports_lock:
        if _pid != os.getpid():
            # Dropped, never closed: closing would send TLS close_notify on the parent's connections.
            _transports.clear()
            _pid = os.getpid()
        transport = _transports.get(settings)
        if transport is None:
            transport = _transports[settings] = FcmTransport(settings)
        return transport


def close_transports() -> None:
    """Close this process's transports (their connections and pools); the next send makes new ones."""
    with _transports_lock:
        transports = list(_transports.values()) if _pid == os.getpid() else []
        _transports.clear()
    for transport in transports:
        transport.close()
