"""Topics in the browser at 375 px: the member unfollows from an inbox row's menu (HTMX, the row redrawn) and from
Preferences; the operator follows a topic fanout's progress in the console. No sideways scrolling, 44 px targets."""

from __future__ import annotations

import pytest

from app.extensions import db
from tests.e2e.helpers import HTMX_IDLE as READY
from tests.e2e.test_phone_layout import OVERFLOW, SMALL_TARGETS
from tests.factories import NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.axe import serious_violations, sign_in_any_language

pytestmark = pytest.mark.e2e

PHONE = {"width": 375, "height": 740}


def _world(live_server) -> dict:
    with live_server.app_context():
        NotificationTypeFactory(type="comment", label="Comments", default_email=True)
        member = UserFactory(timezone="Asia/Tokyo", locale="en")
        operator = UserFactory(role="operator", timezone="Asia/Tokyo", locale="en")
        topics = {}
        for key, name in (
            ("project:42", "Project Apollo with a rather long name that must wrap"),
            ("project:7", "Seven"),
        ):
            topics[key] = db.session.scalar(
                db.text("INSERT INTO topics (key, name) VALUES (:k, :n) RETURNING id"), {"k": key, "n": name}
            )
            db.session.execute(db.text("INSERT INTO topic_subscriptions (user_id, topic_id) VALUES (:u, :t)"),
                               {"u": member.id, "t": topics[key]})  # fmt: skip
        row = NotificationFactory(user_id=member.id, title="Ann commented on Apollo")
        db.session.execute(db.text("UPDATE notifications SET topic_id = :t WHERE id = :id"),
                           {"t": topics["project:42"], "id": row.id})  # fmt: skip
        fanout = db.session.scalar(
            db.text(
                "INSERT INTO topic_fanouts (topic_id, topic_key, type, title, body, dedupe_key, total, done)"
                " VALUES (:t, 'project:42', 'comment', 'Ann commented on Apollo', 'Nice', 'c:1', 4, 1) RETURNING id"
            ),
            {"t": topics["project:42"]},
        )
        db.session.commit()
        world = {"member": member.email, "operator": operator.email, "row": row.id, "fanout": fanout}
        db.session.remove()
    return world


def _layout(page, name: str, problems: list[str]) -> None:
    page.wait_for_function(READY)
    width = page.evaluate(OVERFLOW)
    if width["scroll"] > width["client"]:
        problems.append(f"{name}: scrolls sideways ({width['scroll']} > {width['client']}): {width['wide']}")
    problems.extend(f"{name}: target {what} is {w}×{h} px (< 44)" for what, w, h in page.evaluate(SMALL_TARGETS, 44))
    if violations := serious_violations(page):
        problems.append(f"{name}: {violations}")


def test_unfollow_and_the_console_at_375_px(browser, live_server):
    world = _world(live_server)
    problems: list[str] = []
    context = browser.new_context(base_url=live_server.base_url, viewport=PHONE, locale="en-US")
    try:
        page = context.new_page()
        sign_in_any_language(page, world["member"])
        page.wait_for_function(READY + " && window.htmx !== undefined")
        row = page.locator(f"#notification-{world['row']}")
        row.locator("details.menu summary").click()
        unfollow = row.get_by_role(
            "button", name="Unfollow Project Apollo with a rather long name that must wrap: Ann commented on Apollo"
        )
        unfollow.wait_for()
        _layout(page, "inbox, menu open", problems)
        unfollow.click()
        page.locator("#inbox-status").filter(has_text="You no longer follow Project Apollo").wait_for()
        assert page.locator(f"#notification-{world['row']} form[action$='/unfollow']").count() == 0

        page.goto("/preferences")
        _layout(page, "preferences", problems)
        items = page.locator("#topic-list li .pref-type")
        assert items.all_inner_texts() == ["Seven"]
        page.get_by_role("button", name="Unfollow Seven").click()
        page.locator("#topics-empty").wait_for(state="visible")
        assert page.locator("#topic-list li").count() == 0
        context.close()

        context = browser.new_context(base_url=live_server.base_url, viewport=PHONE, locale="en-US")
        page = context.new_page()
        sign_in_any_language(page, world["operator"])
        page.goto("/console/topic-fanouts")
        _layout(page, "console list", problems)
        page.goto(f"/console/topic-fanouts/{world['fanout']}")
        _layout(page, "console detail", problems)
        bar = page.locator(f"#topic-fanout-progress-{world['fanout']}")
        assert "1 of 4 users" in bar.inner_text()
        with live_server.app_context():
            db.session.execute(db.text("UPDATE topic_fanouts SET status = 'done', done = 4"))
            db.session.commit()
            db.session.remove()
        bar.filter(has_text="4 of 4 users").wait_for(timeout=5000)  # the fragment polls every second
    finally:
        context.close()
    assert not problems, "\n".join(problems)
