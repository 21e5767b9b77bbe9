"""Where a webhook may go: the webhook SSRF rule (app/providers/webhook.py WebhookPolicy), checked at registration.

https on the standard port, never a loopback, private or otherwise non-public address: checked when an
operator registers the endpoint (check_url, which also resolves the name) and by the guarded transport
on every connect. The product names its own hosts, so there is no host allow-list.
"""

from __future__ import annotations

from collections.abc import Mapping

from flask_babel import gettext

from app.providers.endpoints import EndpointRefused
from app.providers.webhook import WebhookPolicy


def check_url(url: str, config: Mapping) -> None:
    """Refuse (EndpointRefused) a URL this server will not post to; resolves the name, as a send would."""
    policy = WebhookPolicy.from_config(config)
    _scheme, host, port = policy.check_url(url)
    try:
        policy.resolve(host, port)
    except OSError as exc:
        raise EndpointRefused(gettext("The webhook URL's host does not resolve.")) from exc
