"""Web Push in a real browser: the subscribe button stores a subscription, the off button removes it.

Chromium's own push service is unreachable here, so the page's PushManager.subscribe/getSubscription
are stubbed with add_init_script (they return a fixed subscription); notification permission is
granted through the browser context. The service worker registration, the VAPID key fetch and
the POST/DELETE to the server are real.
"""

import json

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.extensions import db
from app.models import PushSubscription
from tests.e2e.test_inbox import _sign_in
from tests.factories import UserFactory
from tests.support.push import KEYS, PushService

pytestmark = pytest.mark.e2e

SUBSCRIPTION = PushService(origin="https://localhost").subscribe()  # on the test allow-list (tests/conftest.py)

STUB = """
(() => {
  const data = __SUBSCRIPTION__;
  const subscription = {
    endpoint: data.endpoint,
    toJSON() { return data; },
    unsubscribe: async () => { window.__pushSubscription = null; return true; },
  };
  PushManager.prototype.subscribe = async function (options) {
    window.__pushOptions = { userVisibleOnly: options.userVisibleOnly,
                             keyBytes: new Uint8Array(options.applicationServerKey).length };
    window.__pushSubscription = subscription;
    return subscription;
  };
  PushManager.prototype.getSubscription = async function () { return window.__pushSubscription || null; };
})();
""".replace("__SUBSCRIPTION__", json.dumps(SUBSCRIPTION))


@pytest.fixture
def member(live_server):
    live_server.config["VAPID_PUBLIC_KEY"] = KEYS[0]
    with live_server.app_context():
        user = UserFactory()
        db.session.commit()
        identity = (user.id, user.email)
        db.session.remove()
    yield identity
    live_server.config["VAPID_PUBLIC_KEY"] = ""


def subscriptions(live_server, user_id):
    with live_server.app_context():
        rows = db.session.scalars(sa.select(PushSubscription.endpoint).where(PushSubscription.user_id == user_id)).all()
        db.session.remove()
    return rows


def test_subscribe_and_unsubscribe_buttons(page, live_server, member):
    user_id, email = member
    page.context.grant_permissions(["notifications"], origin=live_server.base_url)
    page.add_init_script(STUB)
    errors = []
    page.on(
        "console",
        lambda msg: (
            errors.append(f"{msg.text} {msg.location.get('url')}")
            if msg.type == "error" and not msg.location.get("url", "").endswith("/favicon.ico")
            else None
        ),
    )
    _sign_in(page, email)
    page.goto("/preferences")
    expect(page.locator("[data-push-status]")).to_have_text("Push notifications are off for this browser.")

    page.get_by_role("button", name="Turn on push for this browser").click()

    expect(page.locator("[data-push-status]")).to_have_text("Push notifications are on for this browser.")
    assert page.evaluate("window.__pushOptions") == {"userVisibleOnly": True, "keyBytes": 65}
    assert subscriptions(live_server, user_id) == [SUBSCRIPTION["endpoint"]]
    assert (
        page.evaluate(
            "navigator.serviceWorker.getRegistration('/').then(r => r && r.active ? "
            "r.active.scriptURL : (r && (r.installing || r.waiting) || {}).scriptURL)"
        )
        == f"{live_server.base_url}/sw.js"
    )

    page.get_by_role("button", name="Turn off push for this browser").click()

    expect(page.locator("[data-push-status]")).to_have_text("Push notifications are off for this browser.")
    expect(page.get_by_role("button", name="Turn on push for this browser")).to_be_visible()
    assert subscriptions(live_server, user_id) == []
    assert errors == []  # no CSP violation, no script error
