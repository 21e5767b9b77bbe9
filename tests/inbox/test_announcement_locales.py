"""The inbox's announcements in the member's language, and many of them collapsed behind "N more" (issue 33)."""

from __future__ import annotations

from datetime import timedelta

from app.clock import db_now
from app.extensions import db
from app.models import User
from tests.factories import AnnouncementFactory
from tests.support.html import one, parse, texts

TITLES = ".list--announcements .item__label"


def _japanese_announcement():
    return AnnouncementFactory(
        title="Maintenance tonight", body="Down at 22:00.", locales={"ja": {"title": "今夜メンテナンス"}}
    )


def test_a_ja_jp_member_reads_the_japanese_title_and_the_base_body(client, member, htmx):
    item = _japanese_announcement()
    member.locale = "ja-jp"
    db.session.flush()
    html = client.get("/inbox").get_data(as_text=True)
    assert texts(html, TITLES) == ["今夜メンテナンス"]
    assert "Down at 22:00." in one(html, f"#announcement-{item.id} .item__text").get_text()  # no Japanese body
    # Marking it read answers with the same words.
    fragment = client.post(f"/inbox/announcements/{item.id}/read", headers=htmx()).get_data(as_text=True)
    assert texts(fragment, ".item__label") == ["今夜メンテナンス"]


def test_the_base_text_for_english_and_the_browser_language_without_a_saved_one(client, member):
    _japanese_announcement()
    member.locale = "en"
    db.session.flush()
    assert texts(client.get("/inbox").data, TITLES) == ["Maintenance tonight"]
    db.session.get(User, member.id).locale = None
    db.session.flush()
    japanese_browser = client.get("/inbox", headers={"Accept-Language": "ja-JP,ja;q=0.9"})
    assert texts(japanese_browser.data, TITLES) == ["今夜メンテナンス"]


def test_five_live_announcements_show_the_newest_three_and_two_more_behind_a_disclosure(client, member):
    now = db_now()
    for n in range(5):
        AnnouncementFactory(title=f"News {n}", published_at=now - timedelta(minutes=10 - n))
    page = parse(client.get("/inbox").data)
    section = one(page, "section[aria-labelledby=announcements-title]")
    assert texts(section.select_one("ul"), ".item__label") == ["News 4", "News 3", "News 2"]
    more = one(section, "details#announcements-more")
    assert more.get("open") is None  # closed until asked; <summary> takes focus and Enter/Space
    assert " ".join(one(more, "summary").get_text().split()) == "2 more announcements"
    assert texts(more, ".item__label") == ["News 1", "News 0"]


def test_three_or_fewer_need_no_disclosure(client, member):
    for n in range(3):
        AnnouncementFactory(title=f"News {n}")
    page = parse(client.get("/inbox").data)
    assert len(page.select(".list--announcements .item")) == 3 and not page.select("#announcements-more")
