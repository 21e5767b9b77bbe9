"""Phone and desktop layouts of the inbox, preferences and sign-in pages, in English and Japanese.

At 375 px (a phone) and 1280 px: no horizontal scrolling, and every interactive element big enough to hit —
44 × 44 px on the phone (WCAG 2.5.5; a finger), 24 × 24 px on the desktop (WCAG 2.5.8; a mouse). Links inside
running text are exempt (WCAG's "inline" exception), as are hidden ones. On the phone the preferences matrix
(type × channel) is one stacked card per type. Screenshots go to test-results/screenshots/ (gitignored).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.devices import service as devices
from app.extensions import db
from tests.e2e.helpers import wait_for_htmx_idle
from tests.factories import AnnouncementFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.axe import settle, sign_in_any_language

pytestmark = pytest.mark.e2e

PHONE = {"width": 375, "height": 740}
DESKTOP = {"width": 1280, "height": 800}
BROWSER_LOCALE = {"en": "en-US", "ja": "ja-JP"}

# Every visible control smaller than `least` px in either direction: [(description, width, height)].
SMALL_TARGETS = """least => {
  const visible = el => {
    const style = getComputedStyle(el);
    const box = el.getBoundingClientRect();
    return style.visibility !== "hidden" && style.display !== "none" && box.width > 1 && box.height > 1
      && !el.closest(".visually-hidden, [hidden], dialog:not([open]), details:not([open]) > :not(summary)");
  };
  const inline = el => el.tagName === "A" && !!el.closest("p, li.small, dd, .field__help, .muted")
    && !el.matches(".button, .tabs__tab");
  const found = [];
  const selector = "a[href], button, input:not([type=hidden]), select, textarea, summary, [role=switch]";
  for (const el of document.querySelectorAll(selector)) {
    if (!visible(el) || inline(el) || el.matches(".skip-link")) continue;
    // A checkbox or radio is hit through its label as well.
    const target = el.matches("input[type=checkbox], input[type=radio]") && el.closest("label") || el;
    const box = target.getBoundingClientRect();
    if (box.width < least - 0.5 || box.height < least - 0.5) {
      const name = (target.getAttribute("aria-label") || target.textContent || target.name || "").trim();
      found.push([target.tagName.toLowerCase() + "." + target.className + " “" + name.slice(0, 40) + "”",
                  Math.round(box.width), Math.round(box.height)]);
    }
  }
  return found;
}"""

OVERFLOW = """() => {
  const root = document.scrollingElement;
  const wide = [...document.querySelectorAll("body *")].filter(
    el => el.getBoundingClientRect().right > root.clientWidth + 1
      && !el.closest(".visually-hidden, .table-wrap, .tabs, dialog:not([open])"));
  return {scroll: root.scrollWidth, client: root.clientWidth,
          wide: wide.slice(0, 5).map(el => el.tagName.toLowerCase() + "." + el.className)};
}"""


def _member(live_server, lang: str) -> str:
    with live_server.app_context():
        user = UserFactory(locale=lang, timezone="Asia/Tokyo", display_name="Hanako Yamada-Lovelace")
        NotificationTypeFactory(type="comment", label="Comments on your posts", default_email=True)
        NotificationTypeFactory(type="security", label="Security", mandatory=True, default_email=True)
        NotificationTypeFactory(type="booking", label="Room bookings", default_push=True)
        now = datetime.now(UTC)
        long_title = "A rather long notification title that should wrap on a phone instead of overflowing"
        for age, title in enumerate(["Your booking is confirmed", long_title, "Reminder: tomorrow"]):
            NotificationFactory(
                user_id=user.id,
                type="comment",
                title=title,
                body="https://example.com/a/very/long/link/without/any/spaces/that/must/wrap/somewhere/sensible",
                created_at=now - timedelta(minutes=5 + age),
            )
        AnnouncementFactory(title="Maintenance tonight", body="The site is down 22:00–23:00.")
        # Phones on the preferences page: a long app version must wrap too.
        devices.register(user.id, {"platform": "ios", "token": "ab" * 32, "app_version": "2026.12.02-build.4711"})
        devices.register(user.id, {"platform": "android", "token": "fcm-demo-token", "app_version": "1.0"})
        db.session.commit()
        email = user.email
        db.session.remove()
    return email


def _check(page, name: str, least: int, problems: list[str], shots: Path) -> None:
    wait_for_htmx_idle(page)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    width = page.evaluate(OVERFLOW)
    if width["scroll"] > width["client"]:
        problems.append(f"{name}: scrolls sideways ({width['scroll']} > {width['client']}): {width['wide']}")
    small = page.evaluate(SMALL_TARGETS, least)
    problems.extend(f"{name}: target {what} is {w}×{h} px (< {least})" for what, w, h in small)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_phone_and_desktop_layouts(browser, live_server, pytestconfig, lang):
    shots = Path(pytestconfig.getoption("--output")) / "screenshots"  # test-results/ unless --output says
    shots.mkdir(parents=True, exist_ok=True)
    email = _member(live_server, lang)
    problems: list[str] = []
    for label, viewport, least in (("phone", PHONE, 44), ("desktop", DESKTOP, 24)):
        context = browser.new_context(
            base_url=live_server.base_url, viewport=viewport, locale=BROWSER_LOCALE[lang], reduced_motion="reduce"
        )
        try:
            page = context.new_page()
            page.goto("/login")
            _check(page, f"login-{label}-{lang}", least, problems, shots)
            sign_in_any_language(page, email)
            assert page.evaluate("document.documentElement.lang") == lang
            _check(page, f"inbox-{label}-{lang}", least, problems, shots)
            page.emulate_media(color_scheme="dark")  # for the eye: the same page in dark mode
            settle(page)
            page.screenshot(path=str(shots / f"inbox-{label}-{lang}-dark.png"), full_page=True)
            assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(17, 20, 24)"
            page.emulate_media(color_scheme="light")
            page.goto("/preferences")
            _check(page, f"preferences-{label}-{lang}", least, problems, shots)
            stacked = page.evaluate("() => getComputedStyle(document.querySelector('.table--matrix tbody tr')).display")
            # Phone: one block (card) per type, channels listed under it; desktop: a real table row.
            assert stacked == ("block" if label == "phone" else "table-row"), (label, stacked)
        finally:
            context.close()
    assert not problems, "\n".join(problems)
