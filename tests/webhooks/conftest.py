"""A webhook receiver per test, and an app that may post to it (http on 127.0.0.1)."""

from __future__ import annotations

import pytest

from tests.webhooks.receiver import Receiver


@pytest.fixture
def local_webhooks(app, monkeypatch):
    """Let endpoints on 127.0.0.1 over http be registered and posted to (the SSRF rule's test switches)."""
    monkeypatch.setitem(app.config, "WEBHOOK_ALLOW_HTTP_ENDPOINTS", True)
    monkeypatch.setitem(app.config, "WEBHOOK_ALLOW_PRIVATE_ADDRESSES", True)
    monkeypatch.setitem(app.config, "WEBHOOK_TIMEOUT_SECONDS", 1.0)
    return app.config


@pytest.fixture
def receiver():
    """A verifying receiver; the test sets its secret once the endpoint exists."""
    r = Receiver().start()
    yield r
    r.stop()


@pytest.fixture
def mailgun_key(app, monkeypatch) -> str:
    """Mailgun's signing key set, as tests/hooks does it."""
    from tests.hooks.conftest import MAILGUN_KEY

    monkeypatch.setitem(app.config, "MAILGUN_WEBHOOK_SIGNING_KEY", MAILGUN_KEY)
    return MAILGUN_KEY
