"""The SMS template editor in a real browser on a phone (375 px), in English and Japanese: the preview follows the
operator's typing (encoding, parts, the characters that forced UCS-2), a text over the type's limit is saved only
once confirmed, and axe finds nothing serious in either state, in light and dark."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from app.extensions import db
from app.models import MessageTemplate
from tests.e2e.helpers import wait_for_htmx_idle
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.axe import COLOUR_OPTIONS, describe, serious_violations, settle, sign_in_any_language

pytestmark = pytest.mark.e2e

PHONE = {"width": 375, "height": 740}
BROWSER_LOCALE = {"en": "en-US", "ja": "ja-JP"}
NO_SIDEWAYS = "() => document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth"


def _operator(live_server, lang: str) -> str:
    with live_server.app_context():
        item = NotificationTypeFactory(type="otp", label="Sign-in code", priority="high")
        item.sms_max_segments = 1
        operator = UserFactory(role="operator", locale=lang, timezone="Asia/Tokyo")
        db.session.commit()
        email = operator.email
        db.session.remove()
    return email


def _axe(page, where: str) -> None:
    wait_for_htmx_idle(page)
    found = serious_violations(page)
    assert not found, describe(found, where)
    page.emulate_media(color_scheme="dark")
    settle(page)
    found = serious_violations(page, COLOUR_OPTIONS)
    page.emulate_media(color_scheme="light")
    settle(page)
    assert not found, describe(found, f"{where} (dark) ")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_sms_preview_follows_typing_and_over_the_limit_asks_first(browser, live_server, lang):
    email = _operator(live_server, lang)
    context = browser.new_context(
        base_url=live_server.base_url, viewport=PHONE, locale=BROWSER_LOCALE[lang], reduced_motion="reduce"
    )
    try:
        page = context.new_page()
        sign_in_any_language(page, email)
        page.goto(f"/console/templates/otp/sms/{lang}")
        body = page.locator("#body_text")
        body.fill("Code {{ data.room }}")
        body.press("End")  # the preview listens for keyup
        expect(page.locator("#sms-encoding")).to_contain_text("GSM-7")
        expect(page.locator("#preview-text")).to_have_text("Code 4B")
        _axe(page, f"{lang} GSM-7: ")

        body.fill("認証コード {{ data.room }} " + "あ" * 70)
        body.press("End")
        expect(page.locator("#sms-encoding")).to_contain_text("UCS-2")
        expect(page.locator("#preview-text mark").first).to_have_text("認証コード")
        expect(page.locator("#sms-forcing li").first).to_contain_text("U+8A8D")
        expect(page.locator("#sms-segments")).to_have_class("console-over")
        expect(page.locator("#sms-over-limit-preview")).to_be_visible()
        assert page.evaluate(NO_SIDEWAYS), "the editor scrolls sideways at 375 px"
        _axe(page, f"{lang} UCS-2 over the limit: ")

        page.locator("#template-form button[type=submit]").click()
        expect(page.locator("#body_text-error")).to_be_visible()  # the warning at the field, nothing saved
        expect(page.locator("#body_text")).to_have_attribute("aria-invalid", "true")
        confirm = page.locator("#save_over_limit")
        expect(confirm).not_to_be_checked()
        assert page.evaluate(NO_SIDEWAYS), "the confirmation scrolls sideways at 375 px"
        _axe(page, f"{lang} confirmation: ")
        with live_server.app_context():
            assert db.session.query(MessageTemplate).count() == 0
            db.session.remove()

        confirm.check()
        page.locator("#template-form button[type=submit]").click()
        expect(page.locator(".alert--success")).to_be_visible()
        with live_server.app_context():
            (saved,) = db.session.query(MessageTemplate).all()
            assert (saved.channel, saved.locale) == ("sms", lang)
            db.session.remove()
    finally:
        context.close()
