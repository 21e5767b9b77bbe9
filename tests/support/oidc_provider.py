"""A real OpenID Connect provider for the sign-in tests: node-oidc-provider (tests/support/oidc/provider.mjs) on
127.0.0.1, its accounts, signing key, token expiry and audience set through the script's /_test/ endpoints.

`make test` installs its node_modules (npm ci, app/devstack). sign_in_at_provider plays the browser between Hato's
redirect to the provider and the provider's redirect back: the provider's own login page, by plain HTTP.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urljoin

import httpx

from tests.support.waiting import free_port, wait_for

HERE = Path(__file__).resolve().parent / "oidc"
CLIENT_ID = "hato-console"
CLIENT_SECRET = "hato-console-test-secret-0123456789"
OTHER_CLIENT_ID = "another-app"


class OidcProvider:
    """One provider process; stop() ends it."""

    def __init__(self, base_urls: list[str], log: Path) -> None:
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        clients = [
            {
                "client_id": client_id,
                "client_secret": CLIENT_SECRET,
                "redirect_uris": [f"{base}/login/oidc/callback" for base in base_urls],
                "post_logout_redirect_uris": [f"{base}/login" for base in base_urls],
            }
            for client_id in (CLIENT_ID, OTHER_CLIENT_ID)
        ]
        node = shutil.which("node") or "node"
        env = dict(os.environ, PORT=str(self.port), CLIENTS=json.dumps(clients))
        self._log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [node, str(HERE / "provider.mjs")], cwd=HERE, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        wait_for(self._answers, 20, f"the OpenID Connect provider on port {self.port} (log: {log})")

    def _answers(self) -> bool:
        assert self.process.poll() is None, "the OpenID Connect provider exited (is node_modules installed?)"
        try:
            return httpx.get(f"{self.issuer}/.well-known/openid-configuration", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def settings(self) -> dict:
        """Hato's settings for this provider (staff values: groups hato-operators / hato-admins)."""
        return {
            "OIDC_ISSUER": self.issuer,
            "OIDC_CLIENT_ID": CLIENT_ID,
            "OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_DISPLAY_NAME": "Test IdP",
            "OIDC_SCOPES": "openid email profile groups",
            "OIDC_ROLE_CLAIM": "groups",
            "OIDC_OPERATOR_VALUES": "hato-operators",
            "OIDC_ADMIN_VALUES": "hato-admins",
        }

    def _admin(self, path: str, body: dict | None = None) -> dict:
        response = httpx.post(f"{self.issuer}/_test/{path}", json=body or {}, timeout=5)
        response.raise_for_status()
        return response.json()

    def set_account(self, login: str, email: str, name: str = "", groups: tuple[str, ...] = ()) -> None:
        """Let login sign in with these claims (changing them takes effect at the next token)."""
        self._admin("accounts", {login: {"email": email, "name": name or login, "groups": list(groups)}})

    def rotate_key(self) -> str:
        """Sign with a new key under a new kid (the old key leaves the JWKS); return the new kid."""
        return self._admin("rotate")["kid"]

    def expire_id_tokens(self, on: bool) -> None:
        self._admin("expire", {"on": on})

    def id_token_audience(self, aud: str | None) -> None:
        self._admin("audience", {"aud": aud})

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()


def sign_in_at_provider(authorize_url: str, login: str, browser: httpx.Client | None = None) -> str:
    """Follow the provider's pages from authorize_url, signing in as login; return the redirect back to Hato."""
    own = browser is None
    browser = browser or httpx.Client(timeout=10)
    try:
        url = authorize_url
        issuer = re.match(r"https?://[^/]+", authorize_url).group(0)
        for _ in range(10):
            response = browser.get(url)
            if response.is_redirect:
                url = urljoin(url, response.headers["location"])
                if not url.startswith(issuer):
                    return url
                continue
            action = re.search(r'<form[^>]*action="([^"]+)"', response.text)
            assert action, f"no form on the provider's page {url}: {response.text[:500]}"
            form = {"prompt": "login", "login": login, "password": "any"}
            response = browser.post(urljoin(url, action.group(1)), data=form)
            assert response.is_redirect, response.text[:500]
            url = urljoin(url, response.headers["location"])
            if not url.startswith(issuer):
                return url
        raise AssertionError("the provider never sent the browser back")
    finally:
        if own:
            browser.close()
