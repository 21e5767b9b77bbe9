"""The preference screen in a real browser: a switch persists, a mandatory cell is locked, quiet hours save."""

import re

import pytest
from playwright.sync_api import expect

from app.extensions import db
from tests.e2e.test_inbox import _sign_in
from tests.factories import NotificationTypeFactory, UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("push_configured")]


@pytest.fixture
def member(live_server):
    with live_server.app_context():
        user = UserFactory(timezone="Asia/Tokyo")
        NotificationTypeFactory(type="comment", label="Comment")
        NotificationTypeFactory(
            type="security",
            label="Sign-in and password changes",
            default_email=True,
            mandatory=True,
            description="Security events on your account.",
        )
        db.session.commit()
        email = user.email
        db.session.remove()
    return email


def test_toggle_persists_after_reload(page, live_server, member):
    _sign_in(page, member)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Preferences").click()
    switch = page.get_by_role("switch", name="Push: Comment")
    expect(switch).to_have_attribute("aria-checked", "false")
    expect(page.locator("#pref-comment-push")).to_contain_text("Default")
    switch.click()
    expect(switch).to_have_attribute("aria-checked", "true")
    expect(page.locator("#pref-comment-push")).to_contain_text("Your choice")
    expect(switch).to_be_focused()
    page.reload()
    expect(page.get_by_role("switch", name="Push: Comment")).to_have_attribute("aria-checked", "true")
    page.get_by_role("switch", name="Push: Comment").click()
    expect(page.locator("#pref-comment-push")).to_contain_text("Default")
    page.reload()
    expect(page.get_by_role("switch", name="Push: Comment")).to_have_attribute("aria-checked", "false")


def test_mandatory_cells_are_locked(page, live_server, member):
    _sign_in(page, member)
    page.goto("/preferences")
    row = page.locator("#type-security")
    expect(row.get_by_role("switch")).to_have_count(0)
    expect(row.locator(".cell--locked")).to_have_count(3)
    expect(page.locator("#pref-security-email")).to_contain_text("On")
    expect(page.locator("#pref-security-email")).to_contain_text("Required")
    expect(page.get_by_text("cannot be switched off here")).to_be_visible()


def test_quiet_hours_save_and_errors_show_in_place(page, live_server, member):
    _sign_in(page, member)
    page.goto("/preferences")
    page.get_by_label("Hold email, push and text messages between").check()
    page.get_by_label("From").fill("22:00")
    page.get_by_role("button", name="Save time zone and quiet hours").click()
    expect(page.get_by_role("alert")).to_contain_text("both a start and an end")
    page.get_by_label("Until").fill("07:00")
    page.get_by_label("Time zone", exact=True).select_option("Europe/Berlin")
    page.get_by_role("button", name="Save time zone and quiet hours").click()
    expect(page.locator("#schedule .alert--success")).to_contain_text(re.compile(r"CES?T"))
    page.reload()
    expect(page.get_by_label("From")).to_have_value("22:00")
    expect(page.get_by_label("Until")).to_have_value("07:00")
    expect(page.get_by_label("Time zone", exact=True)).to_have_value("Europe/Berlin")


def test_a_registered_phone_is_listed_and_turning_it_off_stops_its_pushes(page, live_server, member):
    from app.delivery.channels import channel_for
    from app.devices import service as devices
    from app.users.queries import user_by_email

    with live_server.app_context():
        user_id = user_by_email(member).id
        devices.register(user_id, {"platform": "ios", "token": "ab" * 32, "app_version": "4.2.0"})
        db.session.commit()
        db.session.remove()
    _sign_in(page, member)
    page.goto("/preferences")
    phone = page.locator("#receivers li", has_text="iPhone")
    expect(phone).to_contain_text("app 4.2.0")
    expect(phone).to_contain_text("On")
    phone.get_by_role("button", name="Turn off: iPhone").click()
    expect(page.locator("#receivers [role=status]")).to_have_text("Pushes to it are off.")
    expect(page.locator("#receivers li", has_text="iPhone")).to_contain_text("Off")

    class Row:  # what the push channel's targets() reads of a batch row
        id = 1

    Row.user_id = user_id
    with live_server.app_context():
        assert channel_for("push").targets([Row()]) == {}  # no push goes to the phone now
        db.session.remove()


def test_a_tenants_default_is_named_in_its_cell_passes_axe_and_fits_a_phone(page, live_server, member):
    from app.models import User
    from app.tenants import service as tenants
    from tests.support.axe import describe, serious_violations, settle

    with live_server.app_context():
        user = db.session.query(User).filter_by(email=member).one()
        acme, _ = tenants.put_tenant(None, "acme", {"name": "Acme Incorporated International Holdings"})
        tenants.set_preferences(None, acme, [("comment", "email", True), ("comment", "push", True)])
        tenants.set_member_tenants(None, user.id, ["acme"])
        db.session.commit()
        db.session.remove()
    _sign_in(page, member)
    page.goto(live_server.base_url + "/preferences")
    switch = page.get_by_role("switch", name="Push: Comment")
    expect(switch).to_have_accessible_description("Default for Acme Incorporated International Holdings: on")
    found = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        settle(page)
        found.append(describe(serious_violations(page), f"{scheme}: "))
    assert not "".join(found), "\n".join(found)
    switch.click()  # the member's own choice wins over the tenant's: the note goes
    expect(page.locator("#pref-comment-push .pref-cell__tenant")).to_have_count(0)

    page.set_viewport_size({"width": 375, "height": 740})
    page.reload()
    settle(page)
    overflow = "() => document.scrollingElement.scrollWidth - document.scrollingElement.clientWidth"
    assert page.evaluate(overflow) <= 0
    expect(page.locator("#pref-comment-email .pref-cell__tenant")).to_be_visible()
