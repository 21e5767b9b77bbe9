"""A person signs in, sees the header and a true badge, and signs out."""

import re

import pytest
from playwright.sync_api import expect

from app.extensions import db
from tests.factories import TEST_PASSWORD, NotificationFactory, NotificationTypeFactory, UserFactory

pytestmark = pytest.mark.e2e


@pytest.fixture
def member(live_server):
    with live_server.app_context():
        user = UserFactory(display_name="Erin Example")
        NotificationTypeFactory(type="comment")
        for i in range(3):
            NotificationFactory(user_id=user.id, type="comment", title=f"Unread {i}")
        NotificationFactory(user_id=user.id, type="comment", title="Already read", read_at=db.func.now())
        db.session.commit()
        email = user.email
        db.session.remove()
    return email


def test_sign_in_see_badge_sign_out(page, member):
    page.goto("/inbox")
    expect(page).to_have_url(re.compile(r"/login"))
    page.get_by_label("E-mail").fill(member)
    page.get_by_label("Password").fill("wrong password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not right")

    page.get_by_label("Password").fill(TEST_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/inbox$"))
    expect(page.locator("header")).to_contain_text("Erin Example")
    expect(page.locator("#inbox-badge")).to_have_text("3")
    expect(page.get_by_text("Unread 0")).to_be_visible()

    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/login"))
    page.goto("/inbox")
    expect(page).to_have_url(re.compile(r"/login"))
