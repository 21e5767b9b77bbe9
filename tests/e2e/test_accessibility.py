"""axe-core on every screen, in English and Japanese, light and dark: no serious or critical violation.

One test per language walks all pages with three browser contexts (a member, an operator, nobody signed in),
signing each in once; the inbox is also checked with its older announcements opened from the keyboard, a row's
menu and the shortcut dialog open. English comes
from Accept-Language (en-US) and the users' saved "en"; Japanese from Accept-Language (ja-JP) for the member
(no saved language) and the operator's saved "ja". The end-user pages are checked again with
prefers-color-scheme: dark in both languages, the console's busiest screens in English. Every console screen is
checked at 1280 px and again at 375 px (a phone) in the same visit: the viewport narrows, the layout settles and axe
runs again, which costs one axe run per screen instead of a second walk through every page.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.actions.signing import make_token as action_token
from app.campaigns.service import create_campaign
from app.delivery.unsubscribe import make_token
from app.devices import service as devices
from app.extensions import db
from tests.e2e.helpers import HTMX_IDLE as READY
from tests.factories import (
    AnnouncementFactory,
    DeliveryFactory,
    NotificationFactory,
    NotificationTypeFactory,
    UserFactory,
)
from tests.support.axe import COLOUR_OPTIONS, describe, serious_violations, settle, sign_in_any_language

pytestmark = pytest.mark.e2e

BROWSER_LOCALE = {"en": "en-US", "ja": "ja-JP"}
WIDE = {"width": 1280, "height": 800}
PHONE = {"width": 375, "height": 812}
# Two animation frames after a resize: media queries applied and the layout done before axe reads it.
LAID_OUT = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"


def _world(live_server, lang: str) -> dict:
    """Commit a member with notifications in every state, an operator, and one of each console object."""
    with live_server.app_context():
        NotificationTypeFactory(
            type="comment", label="Comment", default_email=True, locales={"ja": {"label": "コメント"}}
        )
        member = UserFactory(timezone="Asia/Tokyo", locale="en" if lang == "en" else None)
        operator = UserFactory(role="admin", timezone="Asia/Tokyo", locale=lang)
        now = datetime.now(UTC)
        rows = [
            NotificationFactory(
                user_id=member.id,
                title="New reply on your post",
                created_at=now - timedelta(minutes=3),
                actions=[{"label": "Approve", "action": "approve"}, {"label": "View post", "url": "/posts/7"}],
            ),
            NotificationFactory(
                user_id=member.id, title="Room booked", read_at=now, created_at=now - timedelta(hours=2)
            ),
            NotificationFactory(
                user_id=member.id, title="Old invoice", archived_at=now, created_at=now - timedelta(days=3)
            ),
            NotificationFactory(
                user_id=member.id, title="Later", snoozed_until=now + timedelta(hours=5), created_at=now
            ),
        ]
        announcement = AnnouncementFactory(
            title="Maintenance tonight",
            body="The site is down 22:00–23:00.",
            locales={"ja": {"title": "今夜メンテナンス"}},
        )
        for n in range(4):  # five live ones: the inbox shows three and "2 more announcements" (a disclosure)
            AnnouncementFactory(title=f"News {n}", published_at=now - timedelta(hours=n + 2))
        devices.register(member.id, {"platform": "ios", "token": "ab" * 32, "app_version": "4.2.0"})  # preferences
        devices.register(member.id, {"platform": "android", "token": "fcm-demo-token"})
        DeliveryFactory(notification_id=rows[0].id, channel="email", status="failed", attempts=3)
        campaign = create_campaign(operator, name="Spring", type_="comment", title="Spring is here", body="Hello")
        # A registered webhook endpoint, inserted as is (registration would resolve its host name).
        webhook = db.session.scalar(
            db.text(
                "INSERT INTO webhook_endpoints (url, event_types, secret_sealed, secret_hint)"
                " VALUES ('https://example.com/hooks/hato', '{notification.created}', 'x', 'abcd') RETURNING id"
            )
        )
        # A topic the member follows, the newest row from it (its menu offers Unfollow), and a fanout to it.
        topic_id = db.session.scalar(
            db.text("INSERT INTO topics (key, name) VALUES ('project:42', 'Project Apollo') RETURNING id")
        )
        db.session.execute(db.text("INSERT INTO topic_subscriptions (user_id, topic_id) VALUES (:u, :t)"),
                           {"u": member.id, "t": topic_id})  # fmt: skip
        db.session.execute(db.text("UPDATE notifications SET topic_id = :t WHERE id = :id"),
                           {"t": topic_id, "id": rows[0].id})  # fmt: skip
        fanout = db.session.scalar(
            db.text(
                "INSERT INTO topic_fanouts (topic_id, topic_key, type, title, body, dedupe_key, status, total, done)"
                " VALUES (:t, 'project:42', 'comment', 'Ann commented', 'Nice', 'c:1', 'running', 40, 10) RETURNING id"
            ),
            {"t": topic_id},
        )
        db.session.commit()
        world = {
            "member": member.email,
            "operator": operator.email,
            "notification": rows[0].id,
            "announcement": announcement.id,
            "campaign": campaign.id,
            "delivery": db.session.scalar(db.text("SELECT max(id) FROM notification_deliveries")),
            "unsubscribe": make_token(member.id, "comment"),
            "action": action_token(member.id, rows[0].id, "approve"),  # an e-mail's action button (issue 33)
            "webhook": webhook,
            "topic_fanout": fanout,
        }
        db.session.remove()
    return world


def _member_pages(w: dict) -> list[str]:
    return [
        "/inbox",
        "/inbox?filter=unread",
        "/inbox?filter=snoozed",
        "/inbox?filter=archived",
        f"/inbox/notifications/{w['notification']}/snooze",
        "/preferences",
        "/account/sign-ins",
        "/console/",  # 403 for a member
        "/no-such-page",  # 404
    ]


def _anonymous_pages(w: dict) -> list[str]:
    return ["/login", f"/unsubscribe/{w['unsubscribe']}", f"/actions/{w['action']}", "/no-such-page"]


def _console_pages(w: dict, lang: str) -> list[str]:
    return [
        "/console/",
        "/console/dashboard",
        "/console/analytics",
        "/console/announcements",
        "/console/announcements/new",
        f"/console/announcements/{w['announcement']}/edit",
        "/console/types",
        "/console/types/new",
        "/console/types/comment/edit",
        "/console/templates",
        f"/console/templates/comment/email/{lang}",
        f"/console/templates/digest/{lang}",
        "/console/campaigns",
        "/console/campaigns/new",
        f"/console/campaigns/{w['campaign']}",
        "/console/topic-fanouts",
        f"/console/topic-fanouts/{w['topic_fanout']}",
        "/console/deliveries",
        f"/console/deliveries/{w['delivery']}",
        "/console/dlq",
        "/console/channels",
        "/console/suppressions",
        "/console/api-keys",
        "/console/webhooks",
        f"/console/webhooks/{w['webhook']}",
        "/console/users",
        "/console/audit",
    ]


# Screens checked in dark mode as well (all end-user ones; the console's busiest).
DARK_CONSOLE = ("/console/dashboard", "/console/deliveries", "/console/templates/comment/email/", "/console/campaigns/")


# Loaded, scripts run, and no htmx request (hx-trigger="load" fragments, polling) under way.
# The error pages are checked too; every other screen must render.
MEMBER_STATUS = {"/console/": 403, "/no-such-page": 404}


def _check(page, url: str, lang: str, dark: bool, found: list[str], status: int = 200, phone: bool = False) -> None:
    response = page.goto(url)
    assert response is not None
    page.wait_for_function(READY)
    assert response.status == status, f"{url}: {response.status}"
    assert page.evaluate("document.documentElement.lang") == lang, url
    for scheme in ("light", "dark") if dark else ("light",):
        page.emulate_media(color_scheme=scheme)
        settle(page)
        violations = serious_violations(page, None if scheme == "light" else COLOUR_OPTIONS)
        if violations:
            found.append(describe(violations, where=f"[{lang} {scheme}] {url} ({response.status}): "))
    page.emulate_media(color_scheme="light")
    if phone:
        _check_phone(page, url, lang, found)


def _check_phone(page, url: str, lang: str, found: list[str]) -> None:
    """The same screen at 375 px (no reload): scroll regions, reflowed tables and menus as a phone shows them."""
    page.set_viewport_size(PHONE)
    page.evaluate(LAID_OUT)
    settle(page)
    if violations := serious_violations(page):
        found.append(describe(violations, where=f"[{lang} 375 px] {url}: "))
    page.set_viewport_size(WIDE)
    page.evaluate(LAID_OUT)


def _check_open_parts(page, lang: str, found: list[str]) -> None:
    """What only appears on demand: a row's "More" menu, and the "?" shortcut dialog (both schemes)."""
    page.goto("/inbox")
    page.wait_for_function(READY + " && window.htmx !== undefined")
    # j walks the rows on show: after the third announcement comes the first notification, not a folded one.
    for _ in range(4):
        page.keyboard.press("j")
    page.wait_for_function("() => !!document.activeElement.closest('#notification-list')", timeout=5000)
    # The announcements past the newest three open from the keyboard, and are checked open with the menu below.
    page.locator("#announcements-more > summary").focus()
    page.keyboard.press("Enter")
    page.locator("#announcements-more[open]").wait_for()
    page.locator("#notification-list details.menu summary").first.click()
    page.locator("#notification-list details.menu[open]").wait_for()
    if violations := serious_violations(page):
        found.append(describe(violations, where=f"[{lang}] /inbox, a row's menu open: "))
    page.keyboard.press("Escape")
    page.keyboard.press("?")
    page.locator("dialog#shortcuts[open]").wait_for()
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        settle(page)
        if violations := serious_violations(page):
            found.append(describe(violations, where=f"[{lang} {scheme}] /inbox, shortcut dialog open: "))
    page.emulate_media(color_scheme="light")
    page.keyboard.press("Escape")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_no_serious_accessibility_violation_on_any_page(browser, live_server, lang):
    world = _world(live_server, lang)
    found: list[str] = []
    contexts = []

    def context():
        ctx = browser.new_context(
            base_url=live_server.base_url, locale=BROWSER_LOCALE[lang], reduced_motion="reduce", viewport=WIDE
        )
        contexts.append(ctx)
        return ctx.new_page()

    try:
        anonymous = context()
        for url in _anonymous_pages(world):
            _check(anonymous, url, lang, True, found, 404 if url == "/no-such-page" else 200)

        member = context()
        sign_in_any_language(member, world["member"])
        for url in _member_pages(world):
            _check(member, url, lang, True, found, MEMBER_STATUS.get(url, 200))
        _check_open_parts(member, lang, found)

        operator = context()
        sign_in_any_language(operator, world["operator"])
        for url in _console_pages(world, lang):
            _check(operator, url, lang, lang == "en" and url.startswith(DARK_CONSOLE), found, phone=True)
    finally:
        for ctx in contexts:
            ctx.close()
    assert not found, "\n".join(found)
