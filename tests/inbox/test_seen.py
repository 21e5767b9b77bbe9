"""Seen vs read (issue 15, item 6): opening the inbox records the last-seen time; new rows and the unseen badge.

A test runs in one transaction, so now() is the same instant throughout it: rows "from before the
visit" are created earlier than now(), rows "from after it" later.
"""

from datetime import timedelta

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.inbox import queries, service
from tests.factories import AnnouncementFactory, NotificationFactory, UserFactory
from tests.support.html import one, parse, texts


def _now():
    return db.session.execute(sa.text("SELECT now()")).scalar()


def _seen_at(user_id: int):
    return db.session.execute(
        sa.text("SELECT seen_at FROM notification_last_seen WHERE user_id = :u"), {"u": user_id}
    ).scalar()


def _set_seen(user_id: int, at) -> None:
    db.session.execute(
        sa.text(
            "INSERT INTO notification_last_seen VALUES (:u, :at) ON CONFLICT (user_id) DO UPDATE SET seen_at = :at"
        ),
        {"u": user_id, "at": at},
    )


def _bulk(user_id: int, count: int, newest, *, unread: bool = True, prefix: str = "bulk") -> None:
    """count rows one minute apart, the newest at `newest`."""
    db.session.execute(
        sa.text("""
        INSERT INTO notifications (user_id, type, title, body, dedupe_key, read_at, created_at)
        SELECT :user_id, 'comment', :prefix || n, 'b', :prefix || n,
               CASE WHEN :unread THEN NULL ELSE now() END, CAST(:newest AS timestamptz) - (n - 1) * interval '1 minute'
        FROM generate_series(1, :count) n
    """),
        {"user_id": user_id, "count": count, "unread": unread, "newest": newest, "prefix": prefix},
    )


def _new_titles(html: str) -> list[str]:
    """Titles of the rows (and announcements) that carry the "New" marker."""
    return [
        item.select_one(".item__title").get_text(" ", strip=True).removeprefix("Unread: ")
        for item in parse(html).select("li.item")
        if item.select_one("[data-new]")
    ]


def _badge(html: str):
    return one(html, "span#inbox-badge")


@pytest.fixture
def unseen_mode(app, monkeypatch):
    monkeypatch.setitem(app.config, "BADGE_COUNTS", "unseen")


# --- recording the visit ----------------------------------------------------------------------------


def test_opening_the_inbox_upserts_one_last_seen_row_and_never_moves_it_back(client, member):
    assert _seen_at(member.id) is None
    assert client.get("/inbox").status_code == 200
    assert _seen_at(member.id) == _now()
    later = _now() + timedelta(hours=1)
    _set_seen(member.id, later)  # another tab's newer visit
    client.get("/")  # the home page is the inbox too
    assert _seen_at(member.id) == later
    count = db.session.execute(
        sa.text("SELECT count(*) FROM notification_last_seen WHERE user_id = :u"), {"u": member.id}
    ).scalar()
    assert count == 1


@pytest.mark.parametrize("path", ["/inbox?filter=archived", "/inbox/badge"])
def test_the_archived_list_and_the_badge_fragment_do_not_count_as_a_visit(client, member, path):
    assert client.get(path).status_code == 200
    assert _seen_at(member.id) is None


def test_loading_older_rows_does_not_count_as_a_visit(client, member, htmx):
    _bulk(member.id, 25, _now() - timedelta(hours=1))
    cursor = queries.notification_page(member.id).next_cursor
    assert client.get(f"/inbox?cursor={cursor}", headers=htmx()).status_code == 200
    assert _seen_at(member.id) is None


def test_one_users_visit_leaves_another_users_unseen_rows_alone(client, member):
    other = UserFactory()
    NotificationFactory(user_id=other.id, created_at=_now() - timedelta(minutes=1))
    client.get("/inbox")
    assert _seen_at(other.id) is None
    assert queries.badge_counts(other.id) == queries.BadgeCounts(unread=1, unseen=1)


# --- the "New" marker -------------------------------------------------------------------------------


def test_rows_newer_than_the_last_visit_are_marked_new_in_words(client, member):
    an_hour_ago = _now() - timedelta(hours=1)
    NotificationFactory(user_id=member.id, title="Before", created_at=an_hour_ago - timedelta(minutes=5))
    NotificationFactory(user_id=member.id, title="Read elsewhere", created_at=_now() - timedelta(minutes=5))
    db.session.execute(sa.text("UPDATE notifications SET read_at = now() WHERE title = 'Read elsewhere'"))
    NotificationFactory(user_id=member.id, title="Fresh", created_at=_now() - timedelta(minutes=1))
    AnnouncementFactory(title="Old news", published_at=an_hour_ago - timedelta(minutes=1))
    AnnouncementFactory(title="Maintenance", published_at=_now() - timedelta(minutes=2))
    _set_seen(member.id, an_hour_ago)

    html = client.get("/inbox").get_data(as_text=True)
    # New (seen or not) is independent of unread (bold): a row read in an e-mail is still new here.
    assert _new_titles(html) == ["Maintenance", "Fresh", "Read elsewhere"]
    assert texts(html, "[data-new]") == ["New", "New", "New"]
    fresh = one(html, "li.item:-soup-contains('Fresh')")
    assert "item--unread" in fresh["class"]
    assert "item--unread" not in one(html, "li.item:-soup-contains('Read elsewhere')")["class"]

    # The visit was recorded: on the next one nothing is new, until something arrives.
    assert _new_titles(client.get("/inbox").get_data(as_text=True)) == []
    NotificationFactory(user_id=member.id, title="After", created_at=_now() + timedelta(seconds=1))
    assert _new_titles(client.get("/inbox?filter=unread").get_data(as_text=True)) == ["After"]


def test_a_row_fragment_after_an_action_keeps_its_marker_state(client, member, htmx, published):
    row = NotificationFactory(user_id=member.id, title="Ping", created_at=_now() + timedelta(seconds=1))
    html = client.post(f"/inbox/notifications/{row.id}/read", headers=htmx()).get_data(as_text=True)
    assert _new_titles(html) == ["Ping"]  # never opened the inbox since it arrived


# --- counts -----------------------------------------------------------------------------------------


def test_unseen_counts_unread_rows_and_announcements_newer_than_the_visit(member):
    seen = _now() - timedelta(hours=1)
    _set_seen(member.id, seen)
    NotificationFactory.create_batch(2, user_id=member.id, created_at=seen - timedelta(minutes=1))  # unread, seen
    NotificationFactory.create_batch(3, user_id=member.id, created_at=seen + timedelta(minutes=1))  # unread, unseen
    NotificationFactory(user_id=member.id, created_at=seen + timedelta(minutes=2), read_at=_now())  # read elsewhere
    NotificationFactory(user_id=member.id, created_at=seen + timedelta(minutes=2), read_at=_now(), in_app=False)
    AnnouncementFactory(published_at=seen - timedelta(minutes=1))  # unread, seen
    AnnouncementFactory(published_at=seen + timedelta(minutes=1))  # unread, unseen
    AnnouncementFactory(published_at=_now() + timedelta(days=1))  # scheduled: neither
    read = AnnouncementFactory(published_at=seen + timedelta(minutes=1))
    service.read_announcement(member.id, read.id)

    assert queries.unseen_count(member.id) == 3 + 1
    assert queries.unread_counts(member.id).total == 5 + 2
    assert queries.badge_counts(member.id) == queries.BadgeCounts(unread=7, unseen=4)


def test_before_the_first_visit_everything_unread_is_unseen(member):
    NotificationFactory.create_batch(2, user_id=member.id)
    AnnouncementFactory()
    assert queries.badge_counts(member.id) == queries.BadgeCounts(unread=3, unseen=3)
    assert queries.unseen_count(member.id) == 3


@pytest.mark.parametrize(
    ("unseen_rows", "expected"),
    [(30, queries.BadgeCounts(unread=100, unseen=30)), (120, queries.BadgeCounts(unread=100, unseen=100))],
)
def test_both_counts_stop_at_the_cap_like_the_badge(member, unseen_rows, expected):
    seen = _now() - timedelta(days=1)
    _set_seen(member.id, seen)
    _bulk(member.id, unseen_rows, _now(), prefix="after")
    _bulk(member.id, 150 - unseen_rows, seen - timedelta(minutes=1), prefix="before")
    assert queries.badge_counts(member.id) == expected
    assert queries.unseen_count(member.id) == expected.unseen
    assert queries.unread_counts(member.id).total == expected.unread


# --- BADGE_COUNTS -----------------------------------------------------------------------------------


def test_by_default_the_badge_counts_unread_and_a_visit_publishes_nothing(client, member, published):
    NotificationFactory.create_batch(2, user_id=member.id, created_at=_now() - timedelta(minutes=1))
    badge = _badge(client.get("/inbox").get_data(as_text=True))
    assert badge.get_text() == "2" and badge["aria-label"] == "2 unread"
    assert published == []  # the unread badge did not change, so the other tabs hear nothing


def test_unseen_mode_badge_drops_to_zero_on_a_visit_and_tells_the_other_tabs(client, member, unseen_mode, published):
    NotificationFactory.create_batch(2, user_id=member.id, created_at=_now() - timedelta(minutes=1))
    AnnouncementFactory()
    preferences = client.get("/preferences").get_data(as_text=True)  # any page shows the badge
    badge = _badge(preferences)
    assert badge.get_text() == "3" and badge["aria-label"] == "3 new" and badge["data-count"] == "3"
    assert published == []

    inbox = client.get("/inbox").get_data(as_text=True)
    assert _badge(inbox).get_text() == "" and _badge(inbox)["data-count"] == "0"
    assert published == [[member.id]]  # after the commit, for the user's other tabs
    client.get("/inbox")
    assert published == [[member.id]]  # nothing was unseen the second time: no event

    # Still unread: the bold rows stay, and the unread count is unchanged.
    assert queries.badge_counts(member.id) == queries.BadgeCounts(unread=3, unseen=0)
    NotificationFactory(user_id=member.id, created_at=_now() + timedelta(seconds=1))
    assert _badge(client.get("/inbox/badge").get_data(as_text=True)).get_text() == "1"


def test_record_seen_says_whether_anything_was_unseen(member):
    assert service.record_seen(member.id) is False
    NotificationFactory(user_id=member.id, created_at=_now() + timedelta(seconds=1))
    assert service.record_seen(member.id) is True
    _set_seen(member.id, _now() + timedelta(seconds=1))  # (now() stands still inside a test)
    NotificationFactory(user_id=member.id, created_at=_now() + timedelta(seconds=2), read_at=_now())
    assert service.record_seen(member.id) is False  # read elsewhere: nothing unseen
