"""Response hardening: security headers on every response, `Vary: HX-Request` for fragments, the preview CSP."""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import urlsplit

from flask import Flask, Response, current_app, request


def content_security_policy() -> str:
    """Return the CSP: no inline script, nothing framed, websockets only to our own origin."""
    return _csp(current_app.config["BASE_URL"], current_app.config["OIDC_ISSUER"])


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


# Built once per BASE_URL and OIDC issuer (a process has one; tests build apps with others): every response
# carries it. The sign-out form's redirect to the provider's end-session page is a form action (browsers check
# form-action along the redirects too), so the issuer's origin is allowed there when OIDC sign-in is on.
@lru_cache(maxsize=16)
def _csp(base: str, oidc_issuer: str = "") -> str:
    ws_origin = base.replace("https://", "wss://").replace("http://", "ws://")
    form_action = " ".join(filter(None, ["form-action 'self'", _origin(oidc_issuer)]))
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            f"connect-src 'self' {ws_origin}",
            "frame-src 'self'",
            "frame-ancestors 'none'",
            "base-uri 'self'",
            form_action,
            "object-src 'none'",
        ]
    )


def preview_csp() -> str:
    """The site's CSP, plus inline styles and https images, for pages that preview e-mail HTML.

    A srcdoc iframe inherits its parent's CSP, and e-mail HTML is styled inline (mail clients ignore
    stylesheets), so without this the preview would show unstyled. Scripts stay blocked: the
    iframe is sandboxed without allow-scripts and script-src is unchanged.
    """
    return (
        content_security_policy()
        .replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
        .replace("img-src 'self' data:", "img-src 'self' data: https:")
    )


def sent_content_csp() -> str:
    """The site's CSP plus inline styles only, for pages that show HTML that was sent to a user.

    Sent content is built from what a product service put in an API call, so it may carry a tracking
    pixel or a remote stylesheet: an operator opening the delivery log must not tell a third party
    their address and the moment they looked. Images stay limited to this site and data: URLs.
    """
    return content_security_policy().replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")


@lru_cache(maxsize=16)
def _security_headers(base: str, oidc_issuer: str = "") -> tuple[tuple[str, str, str], ...]:
    """(lower-case name, name, value) of every header a response carries, for the site at base."""
    pairs = [
        ("Content-Security-Policy", _csp(base, oidc_issuer)),
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "same-origin"),
        ("Permissions-Policy", "camera=(), microphone=(), geolocation=()"),
        ("Cross-Origin-Opener-Policy", "same-origin"),
    ]
    if base.startswith("https://"):
        pairs.append(("Strict-Transport-Security", "max-age=31536000; includeSubDomains"))
    return tuple((name.lower(), name, value) for name, value in pairs)


def add_security_headers(response: Response) -> Response:
    """Attach the headers every response carries (a header the view set itself is kept)."""
    headers = response.headers
    # One pass over the response's headers instead of one per header set (setdefault scans them all).
    present = {name.lower() for name in headers.keys()}
    config = current_app.config
    for lower, name, value in _security_headers(config["BASE_URL"], config["OIDC_ISSUER"]):
        if lower not in present:
            headers.add(name, value)
    if request.headers.get("HX-Request"):
        response.vary.add("HX-Request")
    if response.mimetype == "text/html":
        response.vary.add("HX-Request")
        if "cache-control" not in present:
            headers.add("Cache-Control", "no-store")
    return response


def init_app(app: Flask) -> None:
    """Register the header hook."""
    app.after_request(add_security_headers)
