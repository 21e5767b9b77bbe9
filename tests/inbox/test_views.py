"""Inbox pages and actions over HTTP: fragments, no-JS fallbacks, IDOR, CSRF, links and times."""

import re
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from flask_babel import force_locale

from app.extensions import db
from app.web.templating import reltime
from tests.factories import AnnouncementFactory, NotificationFactory, UserFactory
from tests.inbox.conftest import state
from tests.support.html import attrs, first, one, parse, texts


def _now():
    return db.session.execute(sa.text("SELECT now()")).scalar()


def _badge(html: str) -> str:
    """The badge's text: the count, "99+" or empty."""
    return one(html, "span#inbox-badge").get_text()


# --- pages ----------------------------------------------------------------------------------------


def test_inbox_needs_sign_in(client):
    response = client.get("/inbox")
    assert response.status_code == 302 and "/login" in response.headers["Location"]


def test_page_lists_rows_marks_unread_and_escapes_titles(client, member):
    NotificationFactory(user_id=member.id, title="<img src=x onerror=alert(1)>")
    NotificationFactory(user_id=member.id, title="Seen", read_at=_now())
    AnnouncementFactory(title="Maintenance tonight")
    html = client.get("/inbox").get_data(as_text=True)
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "<img src=x" not in html
    assert len(parse(html).select("#notification-list > li.item--unread")) == 1
    # The unread notification and the unread announcement.
    assert texts(html, ".item__title > .visually-hidden") == ["Unread:", "Unread:"]
    assert "Maintenance tonight" in html
    assert _badge(html) == "2"


def test_times_are_in_the_users_zone_with_relative_text(client, member):
    NotificationFactory(user_id=member.id, created_at=_now() - timedelta(minutes=5))
    html = client.get("/inbox").get_data(as_text=True)
    stamp = one(html, "#notification-list time[data-relative]")
    assert stamp["datetime"] and re.fullmatch(r".+ JST", stamp["title"]) and stamp.get_text() == "5 minutes ago"


def test_empty_states_say_what_to_do(client, member):
    assert "No notifications yet" in client.get("/inbox").get_data(as_text=True)
    assert "all caught up" in client.get("/inbox?filter=unread").get_data(as_text=True)
    assert "Nothing archived" in client.get("/inbox?filter=archived").get_data(as_text=True)


@pytest.mark.parametrize("query", ["filter=starred", "cursor=not-a-cursor"])
def test_bad_list_parameters_get_400(client, member, query):
    response = client.get(f"/inbox?{query}")
    assert response.status_code == 400
    assert b"Traceback" not in response.data


def test_load_more_is_a_plain_link_and_an_htmx_append(client, member, htmx):
    for n in range(25):
        NotificationFactory(user_id=member.id, title=f"N{n:02d}", created_at=_now() - timedelta(minutes=n))
    first = client.get("/inbox").get_data(as_text=True)
    more = one(first, "#load-more a.button")
    href = more["href"]
    assert more["hx-get"] == href and "cursor=" in href and "offset" not in href

    full = client.get(href).get_data(as_text=True)
    assert "<html" in full and "N20" in full and "N19" not in full and "Back to the newest" in full

    fragment = client.get(href, headers=htmx()).get_data(as_text=True)
    assert "<html" not in fragment and "Announcements" not in fragment
    assert texts(fragment, "li.item .item__link") == [f"N{n}" for n in range(20, 25)]
    assert one(fragment, "#load-more")["hx-swap-oob"] == "true"
    assert texts(fragment, "#load-more .load-more__end") == ["That's everything."]
    assert [row.has_attr("data-first-new") for row in parse(fragment).select("li.item")] == [True] + [False] * 4


def test_archived_filter_shows_only_archived_rows(client, member):
    NotificationFactory(user_id=member.id, title="Kept")
    NotificationFactory(user_id=member.id, title="Put away", read_at=_now(), archived_at=_now())
    html = client.get("/inbox?filter=archived").get_data(as_text=True)
    assert "Put away" in html and "Kept" not in html and "Move to inbox" in html
    assert "Put away" not in client.get("/inbox").get_data(as_text=True)


# --- the badge --------------------------------------------------------------------------------------


def test_badge_fragment_text_is_the_count_or_99_plus_or_empty(client, member):
    assert _badge(client.get("/inbox/badge").get_data(as_text=True)) == ""
    NotificationFactory.create_batch(3, user_id=member.id)
    fragment = client.get("/inbox/badge").get_data(as_text=True)
    assert _badge(fragment) == "3" and one(fragment, "#inbox-badge")["aria-label"] == "3 unread"
    assert "hx-swap-oob" not in fragment
    db.session.execute(
        sa.text("""
        INSERT INTO notifications (user_id, type, title, body, dedupe_key)
        SELECT :u, 'comment', 't', 'b', 'many:' || n FROM generate_series(1, 120) n"""),
        {"u": member.id},
    )
    assert _badge(client.get("/inbox/badge").get_data(as_text=True)) == "99+"


# --- actions ----------------------------------------------------------------------------------------


def test_mark_read_over_htmx_returns_the_row_and_the_badge_out_of_band(client, member, htmx, published):
    row = NotificationFactory(user_id=member.id, title="Hello")
    NotificationFactory(user_id=member.id)
    response = client.post(f"/inbox/notifications/{row.id}/read", headers=htmx())
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    top = first(html)
    assert (top.name, top["id"]) == ("li", f"notification-{row.id}") and "item--unread" not in html
    assert one(html, "span#inbox-badge")["hx-swap-oob"] == "true" and _badge(html) == "1"
    status = one(html, "#inbox-status")
    assert (status["hx-swap-oob"], status.get_text()) == ("innerHTML", "Marked “Hello” read.")
    assert published == [[member.id]]
    assert state(row.id).read_at is not None

    again = client.post(f"/inbox/notifications/{row.id}/read", headers=htmx())
    assert again.status_code == 200 and published == [[member.id]]  # nothing changed, nothing published


def test_actions_without_javascript_redirect_back(client, member, csrf, published):
    row = NotificationFactory(user_id=member.id)
    response = client.post(f"/inbox/notifications/{row.id}/read", data={"next": "/inbox?filter=unread"}, headers=csrf())
    assert response.status_code == 303 and response.headers["Location"] == "/inbox?filter=unread"
    response = client.post(
        f"/inbox/notifications/{row.id}/archive", data={"next": "https://evil.example/"}, headers=csrf()
    )
    assert response.headers["Location"] == "/inbox"
    assert state(row.id).archived_at is not None and len(published) == 2


def test_archive_and_unarchive(client, member, htmx, published):
    row = NotificationFactory(user_id=member.id, title="Old news")
    html = client.post(f"/inbox/notifications/{row.id}/archive", headers=htmx()).get_data(as_text=True)
    assert "item--archived" in attrs(html, f"#notification-{row.id}", "class")[0].split()
    assert "Move to inbox" in html and _badge(html) == ""
    assert "Old news" in client.get("/inbox?filter=archived").get_data(as_text=True)
    html = client.post(f"/inbox/notifications/{row.id}/unarchive", headers=htmx()).get_data(as_text=True)
    assert "item--archived" not in html and "Archive" in texts(html, f"#notification-{row.id} .item__actions button")
    assert state(row.id).archived_at is None and state(row.id).read_at is not None


def test_announcement_read_returns_its_fragment(client, member, htmx, published):
    item = AnnouncementFactory(title="Welcome")
    html = client.post(f"/inbox/announcements/{item.id}/read", headers=htmx()).get_data(as_text=True)
    top = first(html)
    assert (top.name, top["id"]) == ("li", f"announcement-{item.id}") and "item--unread" not in html
    assert _badge(html) == "" and published == [[member.id]]


def test_read_all_refreshes_the_list_and_a_second_time_changes_nothing(client, member, htmx, published):
    NotificationFactory.create_batch(3, user_id=member.id)
    AnnouncementFactory()
    html = client.post("/inbox/read-all", data={"filter": "unread"}, headers=htmx()).get_data(as_text=True)
    top = first(html)
    assert (top.name, top["id"]) == ("div", "inbox-content") and "all caught up" in html
    assert _badge(html) == "" and published == [[member.id]]
    again = client.post("/inbox/read-all", headers=htmx()).get_data(as_text=True)
    assert "Nothing was unread." in again and published == [[member.id]]


def test_read_all_without_javascript_redirects(client, member, csrf, published):
    NotificationFactory(user_id=member.id)
    response = client.post("/inbox/read-all", data={"next": "/inbox"}, headers=csrf())
    assert response.status_code == 303 and response.headers["Location"] == "/inbox"
    assert attrs(client.get("/inbox/badge").get_data(as_text=True), "#inbox-badge", "class") == ["badge badge--empty"]


def test_read_all_rejects_an_unknown_filter(client, member, htmx):
    row = NotificationFactory(user_id=member.id)
    assert client.post("/inbox/read-all", data={"filter": "x"}, headers=htmx()).status_code == 400
    assert state(row.id).read_at is None


# --- IDOR and CSRF ------------------------------------------------------------------------------------

ACTIONS = ["read", "archive", "unarchive", "open"]


@pytest.mark.parametrize("action", ACTIONS)
def test_another_users_notification_is_404_and_unchanged(client, member, htmx, published, action):
    theirs = NotificationFactory(user_id=UserFactory().id, read_at=None)
    response = client.post(f"/inbox/notifications/{theirs.id}/{action}", headers=htmx())
    assert response.status_code == 404
    assert state(theirs.id) == (None, None) and published == []


@pytest.mark.parametrize("action", ACTIONS)
def test_hidden_rows_are_404(client, member, htmx, action):
    hidden = NotificationFactory(user_id=member.id, read_at=_now(), in_app=False)
    assert client.post(f"/inbox/notifications/{hidden.id}/{action}", headers=htmx()).status_code == 404


def test_unknown_or_inactive_announcement_is_404(client, member, htmx):
    expired = AnnouncementFactory(expires_at=_now() - timedelta(minutes=1))
    scheduled = AnnouncementFactory(published_at=_now() + timedelta(days=1))
    for announcement_id in (expired.id, scheduled.id, 10**12):
        assert client.post(f"/inbox/announcements/{announcement_id}/read", headers=htmx()).status_code == 404
    assert db.session.execute(sa.text("SELECT count(*) FROM announcement_reads")).scalar() == 0


@pytest.mark.parametrize(
    "path",
    [
        "/inbox/notifications/{id}/read",
        "/inbox/notifications/{id}/archive",
        "/inbox/notifications/{id}/open",
        "/inbox/read-all",
    ],
)
def test_posts_without_a_csrf_token_are_refused(client, member, published, path):
    row = NotificationFactory(user_id=member.id)
    response = client.post(path.format(id=row.id), headers={"HX-Request": "true"})
    assert response.status_code == 400
    assert state(row.id) == (None, None) and published == []


def test_announcement_read_without_csrf_is_refused(client, member):
    item = AnnouncementFactory()
    assert client.post(f"/inbox/announcements/{item.id}/read").status_code == 400
    assert db.session.execute(sa.text("SELECT count(*) FROM announcement_reads")).scalar() == 0


# --- opening a notification ---------------------------------------------------------------------------


def test_open_marks_read_and_follows_a_same_site_link(client, member, csrf, published):
    row = NotificationFactory(user_id=member.id, link_path="/reservations/100?tab=comments#c3")
    response = client.post(f"/inbox/notifications/{row.id}/open", headers=csrf())
    assert response.status_code == 303 and response.headers["Location"] == "/reservations/100?tab=comments#c3"
    assert state(row.id).read_at is not None and published == [[member.id]]


@pytest.mark.parametrize(
    "link",
    [
        "//evil.example/x",
        "https://evil.example/",
        "javascript:alert(1)",
        "/\\evil.example",
        "/\t/evil.example",
        "reservations/1",
        "",
        None,
    ],
)
def test_open_never_follows_an_off_site_link(client, member, csrf, link):
    row = NotificationFactory(user_id=member.id, link_path=link)
    response = client.post(f"/inbox/notifications/{row.id}/open", headers=csrf())
    assert response.status_code == 303
    assert response.headers["Location"] == f"/inbox#notification-{row.id}"
    assert state(row.id).read_at is not None


def test_rows_with_off_site_links_have_no_open_button(client, member):
    NotificationFactory(user_id=member.id, link_path="javascript:alert(1)")
    safe = NotificationFactory(user_id=member.id, link_path="/preferences")
    html = client.get("/inbox").get_data(as_text=True)
    assert html.count("/open") == 1
    assert one(html, f'#notification-{safe.id} form[action="/inbox/notifications/{safe.id}/open"]')
    assert "javascript:" not in html


# --- presentation helpers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ago, english, japanese",
    [
        (timedelta(seconds=10), "just now", "たった今"),
        (timedelta(minutes=5), "5 minutes ago", "5分前"),
        (timedelta(hours=3), "3 hours ago", "3時間前"),
        (timedelta(days=1, hours=2), "1 day ago", "1日前"),
        (timedelta(days=4), "4 days ago", "4日前"),
    ],
)
def test_reltime(app, ago, english, japanese):
    now = datetime(2026, 10, 6, 12, 0, tzinfo=UTC)
    for language, text, this_year, last_year in (
        ("en", english, "Sep 1", "Sep 1, 2025"),
        ("ja", japanese, "9月1日", "2025年9月1日"),
    ):
        with app.test_request_context(), force_locale(language):
            assert reltime(now - ago, now) == text
            assert reltime(datetime(2026, 9, 1, tzinfo=UTC), now) == this_year
            assert reltime(datetime(2025, 9, 1, tzinfo=UTC), now) == last_year
