"""The console's tenant pages in a real browser (issue 32): axe in light and dark on the list, the new form with
its errors on show, and the editor with its defaults grid; a phone's 375 px without horizontal scrolling."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from app.extensions import db
from app.tenants import service
from tests.e2e.helpers import sign_in
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.axe import describe, serious_violations, settle

pytestmark = pytest.mark.e2e

OVERFLOW = "() => document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth"


def _world(live_server) -> str:
    with live_server.app_context():
        NotificationTypeFactory(type="comment", label="Comments on your posts", default_email=True)
        NotificationTypeFactory(type="security", label="Security", mandatory=True)
        fields = {
            "name": "Acme Incorporated International",
            "primary_color": "#1a73e8",
            "logo_url": "https://cdn.acme.example/a/rather/long/path/logo.png",
            "email_sender_name": "Acme",
        }
        acme, _ = service.put_tenant(None, "acme", fields)
        service.set_preferences(None, acme, [("comment", "email", False)])
        operator = UserFactory(role="operator")
        db.session.commit()
        email = operator.email
        db.session.remove()
    return email


def test_the_tenant_pages_pass_axe_and_fit_a_phone(page, live_server):
    sign_in(page, _world(live_server))
    found = []
    pages = ("/console/tenants", "/console/tenants/acme/edit", "/console/tenants/new")
    for url in pages:
        page.goto(url)
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            settle(page)
            found.append(describe(serious_violations(page), f"{url} {scheme}: "))
        page.emulate_media(color_scheme="light")
    # The new form's errors on show (the error state must pass too).
    page.get_by_label("Key").fill("has space")
    page.get_by_role("button", name="Create").click()
    expect(page.locator("#key-error")).to_be_visible()
    settle(page)
    found.append(describe(serious_violations(page), "errors: "))
    assert not "".join(found), "\n".join(found)

    page.set_viewport_size({"width": 375, "height": 740})
    for url in pages:
        page.goto(url)
        settle(page)
        assert page.evaluate(OVERFLOW) <= 0, url  # (a table's visually hidden header once pushed it out)
    page.goto("/console/tenants/acme/edit")
    expect(page.get_by_role("button", name="Save the defaults")).to_be_visible()


def test_the_template_preview_picks_a_tenant_passes_axe_and_fits_a_phone(page, live_server):
    sign_in(page, _world(live_server))
    page.route("https://cdn.acme.example/**", lambda route: route.fulfill(status=404))  # no network here
    page.goto("/console/templates/comment/email/en")
    page.get_by_label("Preview as a notification of").select_option("acme")
    expect(page.locator("#preview-from")).to_have_text("Acme")
    frame = page.frame_locator("iframe.console-email-frame")
    expect(frame.locator(".brand img")).to_have_attribute("alt", "Acme Incorporated International")
    expect(frame.locator(".card")).to_have_css("border-top-color", "rgb(26, 115, 232)")
    found = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        settle(page)
        found.append(describe(serious_violations(page), f"{scheme}: "))
    assert not "".join(found), "\n".join(found)

    page.get_by_label("Preview as a notification of").select_option("")
    expect(page.locator("#preview-from")).to_have_count(0)
    expect(frame.locator(".brand")).to_have_count(0)

    page.set_viewport_size({"width": 375, "height": 740})
    page.reload()
    settle(page)
    assert page.evaluate(OVERFLOW) <= 0
    expect(page.get_by_label("Preview as a notification of")).to_be_visible()
