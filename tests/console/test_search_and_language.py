"""Console lists: search boxes and filters in the URL (escaped wildcards, ignored bad values, kept by paging),
and the console in Japanese (a flash message, and a date with its UTC value on hover)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.api_keys import service as keys
from app.api_keys.service import key_prefix
from app.extensions import db
from app.models import Campaign, EmailSuppression, MessageTemplate
from tests.factories import AnnouncementFactory, NotificationTypeFactory, UserFactory
from tests.support.html import one, table_rows, texts


def _type_keys(page: str) -> list[str]:
    return [row.split()[0] for row in texts(page, ".console-types tbody td:first-child")]


def test_type_search_takes_wildcards_literally(client, operator):
    NotificationTypeFactory(type="flash_sale", label="Flash sale")
    NotificationTypeFactory(type="flashsale", label="Flashsale")
    db.session.flush()
    assert _type_keys(client.get("/console/types?q=flash_").get_data(as_text=True)) == ["flash_sale"]
    assert _type_keys(client.get("/console/types?q=%25").get_data(as_text=True)) == []
    both = client.get("/console/types?q=FLASH").get_data(as_text=True)
    assert _type_keys(both) == ["flash_sale", "flashsale"]
    empty = client.get("/console/types?q=nothing-like-it").get_data(as_text=True)
    assert "No notification type matches these filters." in empty and 'href="/console/types"' in empty


def test_a_bad_filter_value_is_ignored_with_a_message(client, operator):
    NotificationTypeFactory(type="alpha")
    db.session.flush()
    response = client.get("/console/types?priority=urgent")
    page = response.get_data(as_text=True)
    assert response.status_code == 200 and "Unknown priority “urgent”: that filter was ignored." in page
    assert "alpha" in _type_keys(page)


def test_suppressions_filter_by_reason_and_page_with_the_filters(client, operator):
    for n in range(55):
        db.session.add(EmailSuppression(address=f"a{n:02d}@example.com", reason="bounce"))
    db.session.add(EmailSuppression(address="a99@example.com", reason="complaint"))
    db.session.flush()
    page = client.get("/console/suppressions?q=a&reason=complaint").get_data(as_text=True)
    assert texts(page, ".console-suppressions td.mono") == ["a99@example.com"]
    first = client.get("/console/suppressions?reason=bounce").get_data(as_text=True)
    more = one(first, ".load-more a")["href"]
    assert "reason=bounce" in more and "after=" in more
    second = client.get(more).get_data(as_text=True)
    assert len(texts(second, ".console-suppressions td.mono")) == 5


def test_announcement_search_by_words_and_state(client, operator):
    AnnouncementFactory(title="Maintenance 100% done", body="ok")
    AnnouncementFactory(title="Maintenance tonight", body="ok")
    db.session.flush()
    page = client.get("/console/announcements?q=100%25&state=active").get_data(as_text=True)
    assert texts(page, ".console-announcements strong") == ["Maintenance 100% done"]
    assert 'id="scheduled"' not in page


def test_users_search_is_admins_only_and_keeps_the_role_filter(client, admin):
    UserFactory(email="zed@example.com", role="operator")
    db.session.flush()
    page = client.get("/console/users?q=zed&role=operator").get_data(as_text=True)
    assert texts(page, ".console-users tbody td:first-child") == ["zed@example.com"]
    assert "No user matches “zed”." in client.get("/console/users?q=zed&role=member").get_data(as_text=True)


def test_console_in_japanese_from_accept_language(client, operator):
    AnnouncementFactory(title="お知らせ", published_at=datetime(2026, 11, 30, 0, 5, tzinfo=UTC), expires_at=None)
    db.session.flush()
    page = client.get("/console/announcements", headers={"Accept-Language": "ja"}).get_data(as_text=True)
    assert '<html lang="ja"' in page and "新しいお知らせ" in page and "絞り込みを解除" not in page
    time = one(page, ".console-announcements time")
    assert time["title"] == "2026-11-30 00:05:00 UTC" and time.get_text() == "2026-11-30 09:05 JST"


def test_console_in_the_operators_saved_language_with_a_flash(client, operator, csrf):
    operator.locale = "ja"
    item = AnnouncementFactory(published_at=datetime.now(UTC) + timedelta(days=1), expires_at=None)
    db.session.flush()
    response = client.post(f"/console/announcements/{item.id}/publish", headers=csrf(), follow_redirects=True)
    page = response.get_data(as_text=True)
    assert "お知らせを公開しました。" in page and "公開中" in page
    unknown = client.get("/console/types?priority=urgent").get_data(as_text=True)
    assert "不明な優先度「urgent」: この絞り込みは無視しました。" in unknown


def _campaign(name: str, status: str = "draft", type_: str = "promo", **fields) -> Campaign:
    item = Campaign(name=name, type=type_, title=name, body="b", audience_kind="all", status=status, **fields)
    db.session.add(item)
    db.session.flush()
    return item


def test_campaigns_search_filter_and_page_with_the_filters(client, operator):
    NotificationTypeFactory(type="promo")
    NotificationTypeFactory(type="news")
    for n in range(35):
        _campaign(f"Spring {n:02d}", status="done")
    _campaign("Spring draft")
    _campaign("Autumn_news", type_="news")
    _campaign("Autumnxnews", type_="news")
    names = lambda page: texts(page, ".ops-campaigns td:first-child strong")  # noqa: E731
    assert names(client.get("/console/campaigns?q=autumn_").get_data(as_text=True)) == ["Autumn_news"]
    assert names(client.get("/console/campaigns?type=news").get_data(as_text=True)) == ["Autumnxnews", "Autumn_news"]
    first = client.get("/console/campaigns?q=spring&status=done").get_data(as_text=True)
    assert len(names(first)) == 30 and "Spring draft" not in names(first)
    more = one(first, ".load-more a")["href"]
    assert "status=done" in more and "q=spring" in more and "cursor=" in more
    assert len(names(client.get(more).get_data(as_text=True))) == 5
    bad = client.get("/console/campaigns?status=paused").get_data(as_text=True)
    assert "Unknown status “paused”: that filter was ignored." in bad and len(names(bad)) == 30


def test_templates_filter_by_channel_locale_and_words(client, operator):
    NotificationTypeFactory(type="comment", label="Comments")
    for channel, locale, subject in (
        ("email", "ja-JP", "New comment"),
        ("email", "en", "50% off"),
        ("push", "ja", "x"),
    ):
        db.session.add(MessageTemplate(type="comment", channel=channel, locale=locale, subject=subject))
    db.session.flush()

    def cells(page: str) -> list[tuple]:
        return [tuple(row[:2]) for row in table_rows(page, "#templates-comment table")]

    assert cells(client.get("/console/templates?locale=ja").get_data(as_text=True)) == [
        ("E-mail", "ja-JP"),
        ("Push", "ja"),
    ]
    assert cells(client.get("/console/templates?channel=email&q=50%25").get_data(as_text=True)) == [("E-mail", "en")]
    none = client.get("/console/templates?q=%25%25").get_data(as_text=True)
    assert "No template matches these filters." in none


def test_api_keys_search_by_name_and_state(client, admin):
    keys.create_api_key(admin, "reservations_prod")
    keys.create_api_key(admin, "reservationsXprod")
    old = keys.create_api_key(admin, "billing")
    keys.revoke_api_key(admin, key_prefix(old))
    db.session.flush()
    names = lambda page: [n.split(" by ")[0] for n in texts(page, ".console-keys tbody td:first-child")]  # noqa: E731
    assert names(client.get("/console/api-keys?q=reservations_").get_data(as_text=True)) == ["reservations_prod"]
    live = names(client.get("/console/api-keys?state=live").get_data(as_text=True))
    assert sorted(live) == ["reservationsXprod", "reservations_prod"]


CONSOLE_PAGES = (
    "/console/",
    "/console/announcements",
    "/console/announcements/new",
    "/console/types",
    "/console/types/new",
    "/console/templates",
    "/console/templates/digest/en",
    "/console/suppressions",
    "/console/campaigns",
    "/console/campaigns/new",
    "/console/deliveries",
    "/console/dlq",
    "/console/dashboard",
    "/console/api-keys",
    "/console/users",
    "/console/audit",
)


def test_every_console_page_speaks_japanese(client, admin):
    admin.locale = "ja"
    db.session.flush()
    for url in CONSOLE_PAGES:
        response = client.get(url)
        page = response.get_data(as_text=True)
        assert response.status_code == 200, url
        assert '<html lang="ja"' in page and "管理コンソール" in page, url


def test_form_errors_in_japanese(client, csrf, operator):
    response = client.post(
        "/console/types/new", headers={**csrf(), "Accept-Language": "ja"}, data={"key": "Bad Key", "label": ""}
    )
    page = response.get_data(as_text=True)
    assert response.status_code == 422
    assert "保存されていません。下の印が付いた項目を修正してください。" in page
    assert "小文字で始め、続けて小文字・数字・_ を使ってください（2〜63文字）。" in page


def test_members_cannot_search_console_lists(client, member):
    for url in ("/console/types?q=a", "/console/campaigns?status=done", "/console/suppressions?reason=bounce"):
        assert client.get(url).status_code == 403
