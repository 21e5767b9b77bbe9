"""The console in a real browser: an announcement reaching a member live, the template editor's preview,
and an API key's whole life (create, use against /v1/notifications, revoke, 401)."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from app.extensions import db
from tests.e2e.helpers import sign_in
from tests.factories import NotificationTypeFactory, UserFactory

pytestmark = pytest.mark.e2e


def _user(live_server, **fields) -> str:
    """Commit a user (and the comment type) on the live server; return the e-mail."""
    with live_server.app_context():
        NotificationTypeFactory(type="comment", label="Comment")
        user = UserFactory(**fields)
        db.session.commit()
        email = user.email
        db.session.remove()
    return email


def _sign_in(page, email: str) -> None:
    sign_in(page, email)


def _type(locator, text):
    """Replace the field's text, then release a key: the preview listens for keyup."""
    locator.fill(text)
    locator.press("End")


def test_a_published_announcement_reaches_a_member_live(page, browser, live_server):
    operator = _user(live_server, role="operator")
    member_email = _user(live_server)
    member_context = browser.new_context(base_url=live_server.base_url)
    member = member_context.new_page()
    _sign_in(member, member_email)
    badge = member.locator("#inbox-badge")
    expect(badge).to_have_text("")
    expect(member.locator("header[ws-connect]")).to_have_count(1)
    member.wait_for_timeout(500)  # let the socket finish its handshake before the event

    _sign_in(page, operator)
    page.goto("/console/announcements/new")
    page.get_by_label("Title", exact=True).fill("Library closed on Friday")
    page.get_by_label("Markdown").check()
    _type(page.get_by_label("Body", exact=True), "The **library** is closed.\n\n<script>alert(1)</script>")
    expect(page.locator("#announcement-preview strong")).to_have_text("library")
    expect(page.locator("#announcement-preview")).to_contain_text("<script>alert(1)</script>")  # shown as text
    page.get_by_role("button", name="Create").click()
    expect(page.locator(".alert--success")).to_have_text("Announcement published.")
    expect(page.locator("#active")).to_contain_text("Library closed on Friday")

    # The broadcast badge event reaches the member's open page without a reload (websocket)...
    expect(badge).to_have_text("1", timeout=10_000)
    # ...and after a reload the announcement itself is in the inbox.
    member.reload()
    expect(member.get_by_text("Library closed on Friday")).to_be_visible()
    expect(badge).to_have_text("1")
    member_context.close()


def test_the_template_editor_previews_as_you_type(page, live_server):
    _sign_in(page, _user(live_server, role="operator"))
    page.goto("/console/templates/comment/email/en")
    _type(page.get_by_label("Subject"), "Hello {{ user.name }}")
    expect(page.locator("#preview-subject")).to_have_text("Hello Ada Lovelace")

    html_body = page.get_by_label("HTML body")
    _type(html_body, "<p>Line one</p>\n<p>{{ user.name }</p>")
    problems = page.locator(".console-problems")
    expect(problems).to_contain_text("HTML body, line 2: TemplateSyntaxError")
    expect(problems.locator(".console-problem__line")).to_contain_text("2 | <p>{{ user.name }</p>")

    _type(html_body, "<p>Hi <b>{{ user.name }}</b></p>")
    expect(problems).to_have_count(0)
    frame = page.frame_locator("iframe.console-email-frame")
    expect(frame.locator("b")).to_have_text("Ada Lovelace")
    # The e-mail layout's own <style> applies inside the sandboxed srcdoc frame (CSP allows it there).
    expect(frame.locator(".card")).to_have_css("border-radius", "8px")

    _type(html_body, "{{ cycler.__init__.__globals__ }}")
    expect(problems).to_contain_text("SecurityError")

    _type(html_body, "<p>Hi <b>{{ user.name }}</b></p>")
    expect(problems).to_have_count(0)
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".alert--success")).to_have_text("Template saved.")
    expect(page.get_by_label("Subject")).to_have_value("Hello {{ user.name }}")


def test_an_api_key_is_created_used_and_revoked(page, live_server):
    _user(live_server, external_id="e2e-recipient")
    _sign_in(page, _user(live_server, role="admin"))
    page.goto("/console/api-keys")
    page.get_by_label("Name").fill("e2e-service")
    page.get_by_role("button", name="Create key").click()
    key = page.locator("#new-key").inner_text()
    assert key.startswith("hato_")

    def send(idempotency_key: str):
        return page.request.post(
            "/v1/notifications",
            headers={
                "Authorization": f"Bearer {key}",
                "Idempotency-Key": idempotency_key,
                "Content-Type": "application/json",
            },
            data=json.dumps({"type": "comment", "recipient": "e2e-recipient", "title": "Hello from e2e"}),
        )

    accepted = send("e2e-1")
    assert accepted.status == 202, accepted.text()

    page.goto("/console/api-keys")
    expect(page.locator("tr", has_text="e2e-service")).not_to_contain_text("never")  # last use recorded
    page.once("dialog", lambda dialog: dialog.accept())  # the "Revoke …?" confirmation
    page.get_by_role("button", name="Revoke: e2e-service").click()
    expect(page.locator(".alert--success")).to_contain_text("revoked")
    expect(page.locator("tr", has_text="e2e-service")).to_contain_text("revoked")

    refused = send("e2e-2")
    assert refused.status == 401
    page.goto("/console/audit?action=api_key")
    expect(page.locator("tbody tr")).to_have_count(2)


def test_the_console_in_japanese_keeps_its_filters_in_the_url(page, live_server):
    operator = _user(live_server, role="operator", locale="ja")
    with live_server.app_context():
        NotificationTypeFactory(type="flash_sale", label="セール")
        NotificationTypeFactory(type="flashxsale", label="別のセール")
        db.session.commit()
        db.session.remove()
    _sign_in(page, operator)
    page.goto("/console/types")
    expect(page.locator("html")).to_have_attribute("lang", "ja")
    page.get_by_label("キー・ラベル・説明に含まれる語").fill("flash_")
    page.get_by_role("button", name="検索").click()
    expect(page).to_have_url(re.compile(r"/console/types\?q=flash_&"))
    expect(page.locator(".console-types tbody tr")).to_have_count(1)
    page.reload()
    expect(page.get_by_label("キー・ラベル・説明に含まれる語")).to_have_value("flash_")
    expect(page.locator(".console-types tbody tr")).to_have_count(1)
    page.get_by_role("link", name="絞り込みを解除").first.click()
    expect(page.locator(".console-types tbody tr")).to_have_count(3)  # and the comment type
