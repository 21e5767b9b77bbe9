"""The demo host page of `make run`: a product's page on a second origin (port 5001) that embeds the bell.

It plays the product: its page loads /static/embed/hato-bell.js from Hato and its own backend endpoint
/my-backend/hato-token mints a user token for its signed-in user (the demo member) through Hato's API,
exactly as a product would, so the cross-origin path (CORS, the Origin check, tokens) runs in development
as in production. A token lifetime under 60 s is signed here with the key's signing secret instead (the
other documented way), which the browser tests use to watch a refresh without a reload.
"""

from __future__ import annotations

import argparse
import base64
import html
import os
import threading
import time
from pathlib import Path

import jwt
import requests
from flask import Flask, Response, jsonify, request

DEMO_PORT = 5001
DEMO_USER = "demo-alice"
KEY_FILE = Path(__file__).resolve().parents[2] / "var" / "demo_bell_key"
TIMEOUT_SECONDS = 5

PAGE = """<!doctype html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ margin: 0; font: 16px/1.5 system-ui, sans-serif; color: #1a1a1a; background: #fafafa; }}
header {{ display: flex; align-items: center; justify-content: space-between; padding: 8px 24px;
          background: #fff; border-bottom: 1px solid #ddd; }}
header p {{ margin: 0; font-weight: 700; }}
main {{ max-width: 720px; margin: 24px auto; padding: 0 24px; }}
@media (prefers-color-scheme: dark) {{ body {{ background: #121212; color: #eee; }}
  header {{ background: #1f1f1f; border-color: #444; }} }}
</style>
<script src="{hato}/static/embed/hato-bell.js" async></script>
</head>
<body>
<header>
  <p>{product}</p>
  <nav aria-label="{nav}"><hato-bell base-url="{hato}" token-endpoint="/my-backend/hato-token"></hato-bell></nav>
</header>
<main>
  <h1>{title}</h1>
  <p>{intro}</p>
  <p>{count_label} <output id="host-count">–</output></p>
</main>
<script>
  document.addEventListener("hato-count", (event) => {{
    document.getElementById("host-count").textContent = String(event.detail.badge);
  }});
</script>
</body>
</html>
"""

TEXT = {
    "en": {
        "title": "Acme projects (demo host page)",
        "product": "Acme",
        "nav": "Account",
        "intro": "A product page on another origin that embeds Hato's bell: it fetches user tokens from its own "
        "backend (/my-backend/hato-token) and talks to Hato across origins.",
        "count_label": "This page heard the bell's count:",
    },
    "ja": {
        "title": "Acme プロジェクト（デモのホストページ）",
        "product": "Acme",
        "nav": "アカウント",
        "intro": "Hato のベルを埋め込んだ、別オリジンの製品ページです。ユーザートークンは自分のバックエンド"
        "（/my-backend/hato-token）から受け取り、オリジンをまたいで Hato と通信します。",
        "count_label": "このページが受け取ったベルの件数:",
    },
}


class Minter:
    """The product's backend side: mint through POST /v1/user-tokens, or sign with the key's secret."""

    def __init__(self, hato_url: str, api_key: str) -> None:
        self.hato_url, self.api_key = hato_url.rstrip("/"), api_key
        self._secret: dict | None = None
        self._lock = threading.Lock()

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {self.api_key}"}

    def mint(self, user: str, ttl: int, tenant: str | None = None) -> dict:
        """Return {"token", "expires_at" (epoch seconds)} for user (scoped to the tenant with key tenant, if any)."""
        if ttl < 60:
            return self.sign(user, ttl)
        body = {"user": user, "ttl": ttl, **({"tenant": tenant} if tenant else {})}
        response = requests.post(
            f"{self.hato_url}/v1/user-tokens", json=body, headers=self._headers(), timeout=TIMEOUT_SECONDS
        )
        response.raise_for_status()
        body = response.json()
        token = body["token"]
        return {"token": token, "expires_at": jwt.decode(token, options={"verify_signature": False})["exp"]}

    def sign(self, user: str, ttl: int, audience: str | None = None) -> dict:
        """Sign a token here, as a backend that holds the key's signing secret would."""
        with self._lock:
            if self._secret is None:
                response = requests.get(
                    f"{self.hato_url}/v1/user-tokens/signing-secret", headers=self._headers(), timeout=TIMEOUT_SECONDS
                )
                response.raise_for_status()
                self._secret = response.json()
        secret = self._secret
        key = base64.urlsafe_b64decode(secret["secret"] + "=" * (-len(secret["secret"]) % 4))
        expires_at = int(time.time()) + ttl
        claims = {"sub": user, "aud": audience or secret["audience"], "exp": expires_at}
        return {
            "token": jwt.encode(claims, key, algorithm="HS256", headers={"kid": secret["kid"]}),
            "expires_at": expires_at,
        }


def create_host(hato_url: str, api_key: str, user: str = DEMO_USER, ttl: int = 3600) -> Flask:
    """Return the demo host app. config["MINT_MODE"]: ok, fail (500), expired or refused (tokens Hato refuses)."""
    host = Flask(__name__)
    host.config.update(MINT_MODE="ok", TOKEN_TTL=ttl, DEMO_USER=user, TOKENS_ISSUED=0)
    minter = Minter(hato_url, api_key)

    @host.get("/")
    def page():
        lang = "ja" if request.args.get("lang") == "ja" else "en"
        text = {name: html.escape(value) for name, value in TEXT[lang].items()}
        body = PAGE.format(lang=lang, hato=html.escape(hato_url.rstrip("/")), **text)
        return Response(body, mimetype="text/html")

    @host.post("/my-backend/hato-token")
    def hato_token():
        # A real product checks its own session here and mints for that user only.
        mode = host.config["MINT_MODE"]
        if mode == "fail":
            return jsonify({"error": "token service down"}), 500
        host.config["TOKENS_ISSUED"] += 1
        if mode == "expired":
            return jsonify(minter.sign(host.config["DEMO_USER"], -120))
        if mode == "refused":  # looks fine to the browser, refused by Hato (made for another Hato)
            return jsonify(minter.sign(host.config["DEMO_USER"], 3600, audience="https://elsewhere.invalid"))
        return jsonify(minter.mint(host.config["DEMO_USER"], host.config["TOKEN_TTL"], host.config.get("DEMO_TENANT")))

    return host


def demo_api_key() -> str:
    """Return the demo's API key (scope feed:issue), kept in var/demo_bell_key; create it once."""
    from app import create_app
    from app.api_keys.service import authenticate, create_api_key
    from app.unitofwork import commit

    app = create_app()
    with app.app_context():
        if KEY_FILE.exists():
            key = KEY_FILE.read_text().strip()
            identity = authenticate(key)
            if identity is not None and identity.allows("feed:issue"):
                return key
        key = create_api_key(None, "demo host page (make run)", ["feed:issue"])
        commit()
    KEY_FILE.parent.mkdir(exist_ok=True)
    KEY_FILE.write_text(key + "\n")
    KEY_FILE.chmod(0o600)
    return key


def main(argv: list[str] | None = None) -> int:
    """Serve the demo host page until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m app.devstack.demo_host", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=DEMO_PORT)
    parser.add_argument("--hato", default=os.environ.get("BASE_URL", "http://127.0.0.1:5000"))
    parser.add_argument("--ttl", type=int, default=3600, help="token lifetime in seconds (under 60: signed here)")
    args = parser.parse_args(argv)
    from werkzeug.serving import run_simple

    run_simple("127.0.0.1", args.port, create_host(args.hato, demo_api_key(), ttl=args.ttl), threaded=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
