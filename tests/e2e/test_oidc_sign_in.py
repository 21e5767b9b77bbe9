"""An operator signs in through a real OpenID Connect provider's login page into the console, and signs out of both."""

import re

import pytest
from playwright.sync_api import expect

from app.extensions import db
from app.models import OidcAccount, User
from tests.support import axe
from tests.support.oidc_provider import OidcProvider

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def provider(live_server, tmp_path_factory):
    started = OidcProvider([live_server.base_url], tmp_path_factory.mktemp("oidc-e2e") / "provider.log")
    yield started
    started.stop()


@pytest.fixture
def oidc_live(live_server, provider, monkeypatch):
    for key, value in provider.settings().items():
        monkeypatch.setitem(live_server.config, key, value)
    return provider


def test_operator_signs_in_through_the_provider_and_out_of_both(page, live_server, oidc_live):
    oidc_live.set_account("olivia", "olivia@corp.example", "Olivia Operator", groups=("hato-operators",))
    page.set_viewport_size({"width": 375, "height": 800})
    page.goto("/console/")
    expect(page).to_have_url(re.compile(r"/login\?next="))
    button = page.get_by_role("link", name="Sign in with Test IdP")
    expect(button).to_be_visible()
    assert not axe.serious_violations(page), axe.describe(axe.serious_violations(page), "login with SSO at 375 px")

    button.click()
    expect(page).to_have_url(re.compile(re.escape(oidc_live.issuer) + r"/interaction/"))  # the provider's page
    page.get_by_placeholder("Enter any login").fill("olivia")
    page.get_by_placeholder("and password").fill("anything")
    page.get_by_role("button", name="Sign-in").click()

    expect(page).to_have_url(re.compile(r"/console/$"))  # the next path survived the round trip
    expect(page.locator("header")).to_contain_text("Olivia Operator")
    with live_server.app_context():
        user = db.session.scalars(db.select(User).where(User.email == "olivia@corp.example")).one()
        assert user.role == "operator"
        assert db.session.get(OidcAccount, (oidc_live.issuer, "olivia")).user_id == user.id
        db.session.remove()

    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(re.escape(oidc_live.issuer) + r"/session/end"))
    page.get_by_role("button", name=re.compile("yes", re.IGNORECASE)).click()  # the provider asks, then sends back
    expect(page).to_have_url(re.compile(r"/login$"))
    page.goto("/console/")
    expect(page).to_have_url(re.compile(r"/login"))
