"""Response hardening: security headers on every response, `Vary: HX-Request` for fragments, the preview CSP."""

from __future__ import annotations

from flask import Flask, Response, current_app, request


def content_security_policy() -> str:
    """Return the CSP: no inline script, nothing framed, websockets only to our own origin."""
    base = current_app.config["BASE_URL"]
    ws_origin = base.replace("https://", "wss://").replace("http://", "ws://")
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
            "form-action 'self'",
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


def add_security_headers(response: Response) -> Response:
    """Attach the headers every response carries."""
    headers = response.headers
    headers.setdefault("Content-Security-Policy", content_security_policy())
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Referrer-Policy", "same-origin")
    headers.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
    headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
    if current_app.config["BASE_URL"].startswith("https://"):
        headers.setdefault("Strict-Transport-Security", "max-age=31536000; includeSubDomains")
    if request.headers.get("HX-Request"):
        response.vary.add("HX-Request")
    if response.mimetype == "text/html":
        response.vary.add("HX-Request")
        response.headers.setdefault("Cache-Control", "no-store")
    return response


def init_app(app: Flask) -> None:
    """Register the header hook."""
    app.after_request(add_security_headers)
