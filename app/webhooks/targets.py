"""Where a webhook may go: push's SSRF rule (app/providers/endpoints.py) without the push-service allow-list.

https on the standard port, never a loopback, private or otherwise non-public address: checked when an
operator registers the endpoint (check_url, which also resolves the name) and by the guarded transport
on every connect. The product names its own hosts, so there is no host allow-list.
"""

from __future__ import annotations

from collections.abc import Mapping

from flask_babel import gettext

from app.providers.endpoints import DEFAULT_PORTS, EndpointPolicy, EndpointRefused, _ip, normal_host


class WebhookPolicy(EndpointPolicy):
    """Push's endpoint rule without the push-service allow-list."""

    def check_host(self, scheme: str, host: str, port: int | None) -> None:
        """Refuse a scheme, port or address this server does not post to."""
        if scheme != "https" and not (scheme == "http" and self.allow_http):
            raise EndpointRefused(gettext("The webhook URL must be an https URL."))
        if port not in (None, DEFAULT_PORTS[scheme]) and not self.allow_http:
            raise EndpointRefused(gettext("The webhook URL must use the standard https port."))
        if not normal_host(host):
            raise EndpointRefused(gettext("The webhook URL has no host."))
        if _ip(normal_host(host)) is not None:
            self.check_address(normal_host(host))

    @classmethod
    def from_config(cls, config: Mapping) -> WebhookPolicy:
        """WEBHOOK_ALLOW_HTTP_ENDPOINTS and WEBHOOK_ALLOW_PRIVATE_ADDRESSES as one rule."""
        return cls(
            (), bool(config.get("WEBHOOK_ALLOW_HTTP_ENDPOINTS")), bool(config.get("WEBHOOK_ALLOW_PRIVATE_ADDRESSES"))
        )


def check_url(url: str, config: Mapping) -> None:
    """Refuse (EndpointRefused) a URL this server will not post to; resolves the name, as a send would."""
    policy = WebhookPolicy.from_config(config)
    _scheme, host, port = policy.check_url(url)
    try:
        policy.resolve(host, port)
    except OSError as exc:
        raise EndpointRefused(gettext("The webhook URL's host does not resolve.")) from exc
