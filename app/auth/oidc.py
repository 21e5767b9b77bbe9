"""OpenID Connect for console sign-in, through Authlib: discovery, code flow with PKCE (S256), state and nonce, the ID
token checked against the issuer's JWKS (an unknown kid refetches the JWKS once: key rotation), RP-initiated logout.

Authlib keeps the pending sign-in (state, nonce, code verifier, redirect URI) in the session under the state's own
key, so a callback whose state this browser did not start finds nothing and is refused; a replayed code is refused
by the provider (a code is single use). One client per configuration per process: discovery and the JWKS are
fetched once and kept.
"""

from __future__ import annotations

import logging
from urllib.parse import urlencode, urlsplit

from authlib.common.errors import AuthlibBaseError
from authlib.integrations.flask_client import FlaskIntegration
from authlib.integrations.flask_client.apps import FlaskOAuth2App
from flask import current_app, session
from joserfc.errors import JoseError
from requests import RequestException

log = logging.getLogger(__name__)

NAME = "oidc"
PENDING_PREFIX = f"_state_{NAME}_"  # where Authlib keeps a pending sign-in in the session
# Clock difference tolerated between the provider and this host when reading exp/iat.
LEEWAY_SECONDS = 60
ROLES_BY_RANK = ("member", "operator", "admin")


class SignInRefused(Exception):
    """The provider's answer cannot sign anyone in; the message says why (for the log, not for the page)."""


def configured() -> bool:
    """Whether console sign-in through OpenID Connect is set up."""
    return bool(current_app.config["OIDC_ISSUER"])


def issuer() -> str:
    """The configured issuer, without a trailing slash (as providers write it in tokens, mostly)."""
    return current_app.config["OIDC_ISSUER"].rstrip("/")


def client() -> FlaskOAuth2App:
    """This process's Authlib client for the current settings (tests change them; each setting gets its own)."""
    cfg = current_app.config
    key = (cfg["OIDC_ISSUER"], cfg["OIDC_CLIENT_ID"], cfg["OIDC_CLIENT_SECRET"], cfg["OIDC_SCOPES"])
    clients = current_app.extensions.setdefault("hato_oidc_clients", {})
    if key not in clients:
        clients[key] = FlaskOAuth2App(
            FlaskIntegration(NAME),
            name=NAME,
            client_id=cfg["OIDC_CLIENT_ID"],
            client_secret=cfg["OIDC_CLIENT_SECRET"],
            server_metadata_url=issuer() + "/.well-known/openid-configuration",
            client_kwargs={
                "scope": cfg["OIDC_SCOPES"],
                "code_challenge_method": "S256",
                "default_timeout": cfg["OIDC_TIMEOUT"],
            },
        )
    return clients[key]


def start(redirect_uri: str):
    """Return the redirect to the provider's authorization endpoint (state, nonce and PKCE kept in the session)."""
    # Only the newest sign-in waits: each pending one is ~600 bytes of the session cookie, which holds 4 KB.
    for key in [key for key in session if key.startswith(PENDING_PREFIX)]:
        session.pop(key)
    try:
        return client().authorize_redirect(redirect_uri)
    except (RequestException, ValueError, RuntimeError) as exc:
        raise SignInRefused(f"discovery failed: {exc}") from exc


def finish() -> tuple[dict, str]:
    """Check the callback (state, code at the token endpoint, ID token) and return (claims, raw ID token)."""
    oidc = client()
    try:
        metadata = oidc.load_server_metadata()
        if str(metadata.get("issuer", "")).rstrip("/") != issuer():  # a discovery document for someone else
            raise SignInRefused(f"discovery names issuer {metadata.get('issuer')!r}, not {issuer()!r}")
        # Authlib checks aud only when told to (OIDC Core 3.1.3.7: it must name this client), iss likewise.
        expected = {
            "iss": {"essential": True, "values": [metadata["issuer"]]},
            "aud": {"essential": True, "values": [current_app.config["OIDC_CLIENT_ID"]]},
        }
        token = oidc.authorize_access_token(leeway=LEEWAY_SECONDS, claims_options=expected)
    except (AuthlibBaseError, JoseError, RequestException, ValueError, RuntimeError) as exc:
        raise SignInRefused(f"{type(exc).__name__}: {exc}") from exc
    claims = token.get("userinfo")
    if not claims or not token.get("id_token"):
        raise SignInRefused("the provider answered without an ID token")
    claims = dict(claims)
    if current_app.config["OIDC_ROLE_CLAIM"] not in claims or not claims.get("email"):
        claims = _with_userinfo(oidc, token, claims)
    return claims, token["id_token"]


def _with_userinfo(oidc, token: dict, claims: dict) -> dict:
    """Add what the userinfo endpoint says (some providers put groups or e-mail there only); the ID token wins."""
    if not oidc.load_server_metadata().get("userinfo_endpoint"):
        return claims
    try:
        info = dict(oidc.userinfo(token=token))
    except (AuthlibBaseError, RequestException, ValueError) as exc:
        log.warning("OIDC userinfo unavailable, signing in with the ID token's claims: %s", exc)
        return claims
    if info.get("sub") != claims.get("sub"):  # OIDC Core 5.3.2: a userinfo answer about someone else is ignored
        log.warning("OIDC userinfo is about another subject; ignored")
        return claims
    return {**info, **claims}


def _values(setting: str) -> set[str]:
    return {value.strip() for value in str(current_app.config[setting]).split(",") if value.strip()}


def role_from(claims: dict) -> str:
    """The console role the claims give: admin or operator by OIDC_ROLE_CLAIM's values, else member."""
    raw = claims.get(current_app.config["OIDC_ROLE_CLAIM"])
    values = {raw} if isinstance(raw, str) else {str(v) for v in raw} if isinstance(raw, list) else set()
    if values & _values("OIDC_ADMIN_VALUES"):
        return "admin"
    if values & _values("OIDC_OPERATOR_VALUES"):
        return "operator"
    return "member"


def logout_url(id_token: str | None, post_logout_redirect_uri: str) -> str | None:
    """The provider's end-session URL for this sign-in (RP-initiated logout), or None when it offers none."""
    try:
        endpoint = client().load_server_metadata().get("end_session_endpoint")
    except (RequestException, ValueError) as exc:
        log.warning("OIDC discovery unavailable at sign-out; the provider's session stays: %s", exc)
        return None
    if not endpoint:
        return None
    if urlsplit(endpoint)[:2] != urlsplit(issuer())[:2]:  # the page's form-action allows the issuer's origin only
        log.warning(
            "OIDC end_session_endpoint %s is not on the issuer's origin; the provider's session stays", endpoint
        )
        return None
    params = {"post_logout_redirect_uri": post_logout_redirect_uri, "client_id": current_app.config["OIDC_CLIENT_ID"]}
    if id_token:
        params["id_token_hint"] = id_token
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(params)}"
