"""Snooze: the menu's times in the user's zone, hidden while snoozed, out of the badge, woken on top."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.inbox import queries, service
from app.inbox.snooze import SnoozeError, choice_time, picked_time
from app.sweeper import sweep_once
from app.unitofwork import commit
from tests.factories import NotificationFactory, UserFactory
from tests.support.html import one, parse, texts

TOKYO = ZoneInfo("Asia/Tokyo")
NEW_YORK = ZoneInfo("America/New_York")


def _now():
    return db.session.execute(sa.text("SELECT now()")).scalar()


def _row(notification_id: int):
    return db.session.execute(
        sa.text("SELECT read_at, snoozed_until, created_at FROM notifications WHERE id = :id"), {"id": notification_id}
    ).one()


def _listed(client, query: str = "") -> list[str]:
    return texts(client.get(f"/inbox{query}").get_data(as_text=True), "#notification-list .item__title .item__link")


def _badge(client) -> str:
    return one(client.get("/inbox/badge").get_data(as_text=True), "#inbox-badge").get_text()


@pytest.fixture
def toasts(monkeypatch):
    """(user ids, toast title) of every badge event published."""
    calls: list[tuple[list[int], str | None]] = []

    def record(ids, toast=None, *rest):
        calls.append((sorted(ids), (toast or {}).get("title")))
        return set(ids)

    monkeypatch.setattr("app.live.publish.route_badge", record)
    return calls


# --- the menu's times ---------------------------------------------------------------------------------


def test_choices_in_tokyo_on_a_monday_evening():
    now = datetime(2026, 11, 30, 14, 0, tzinfo=UTC)  # Monday 23:00 in Tokyo
    assert choice_time("hour", now, TOKYO) == now + timedelta(hours=1)
    assert choice_time("tomorrow", now, TOKYO) == datetime(2026, 12, 1, 9, 0, tzinfo=TOKYO)
    # "Next Monday" on a Monday is a week ahead, not today.
    assert choice_time("monday", now, TOKYO) == datetime(2026, 12, 7, 9, 0, tzinfo=TOKYO)


def test_choices_follow_the_users_date_not_utcs():
    now = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)  # still Sunday in UTC, Monday 05:00 in Tokyo
    assert choice_time("tomorrow", now, TOKYO) == datetime(2026, 12, 1, 9, 0, tzinfo=TOKYO)
    assert choice_time("monday", now, TOKYO) == datetime(2026, 12, 7, 9, 0, tzinfo=TOKYO)
    assert choice_time("monday", now, ZoneInfo("UTC")) == datetime(2026, 11, 30, 9, 0, tzinfo=UTC)  # a Sunday


def test_nine_oclock_stays_nine_across_daylight_saving():
    now = datetime(2026, 3, 7, 23, 0, tzinfo=UTC)  # Saturday 18:00 EST; clocks go forward that night
    tomorrow = choice_time("tomorrow", now, NEW_YORK)
    assert tomorrow.astimezone(UTC) == datetime(2026, 3, 8, 13, 0, tzinfo=UTC)  # 09:00 EDT


def test_unknown_choice_is_refused():
    with pytest.raises(SnoozeError):
        choice_time("forever", datetime.now(UTC), TOKYO)


def test_picked_time_is_read_in_the_users_zone_and_bounded():
    now = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)  # 09:00 in Tokyo
    assert picked_time("2026-12-01T09:30", now, TOKYO) == datetime(2026, 12, 1, 0, 30, tzinfo=UTC)
    for text, message in [
        ("", "Pick a date"),
        ("next week", "Pick a date"),
        ("2026-11-30T08:59", "already passed"),
        ("2027-03-01T09:01", "at most 90 days"),
    ]:
        with pytest.raises(SnoozeError, match=message):
            picked_time(text, now, TOKYO)
    assert picked_time("2027-02-28T09:00", now, TOKYO)  # exactly 90 days


# --- snoozing over HTTP -----------------------------------------------------------------------------


def test_without_javascript_a_choice_hides_the_row_reads_it_and_lowers_the_badge(client, member, csrf, toasts):
    row = NotificationFactory(user_id=member.id, title="Build failed")
    NotificationFactory(user_id=member.id, title="Other")
    assert _badge(client) == "2"
    response = client.post(
        f"/inbox/notifications/{row.id}/snooze", data={"choice": "hour", "next": "/inbox?filter=unread"}, headers=csrf()
    )
    assert response.status_code == 303 and response.headers["Location"] == "/inbox?filter=unread"
    read_at, until, _ = _row(row.id)
    assert read_at is not None and until == _now() + timedelta(hours=1)
    assert toasts == [([member.id], None)]  # the user's other tabs recount
    assert _badge(client) == "1"
    for query in ("", "?filter=unread", "?filter=archived"):
        assert "Build failed" not in _listed(client, query)
    snoozed = client.get("/inbox?filter=snoozed").get_data(as_text=True)
    assert texts(snoozed, "#notification-list .item__link") == ["Build failed"]
    assert "Snoozed until" in one(snoozed, "#notification-list .item__meta").get_text() and "JST" in snoozed
    assert one(snoozed, "#notification-list .item__actions button").get_text() == "Unsnooze"


def test_the_menu_offers_the_three_choices_a_picker_in_the_users_zone_and_a_page_of_its_own(client, member):
    row = NotificationFactory(user_id=member.id, title="Deploy done")
    html = client.get("/inbox").get_data(as_text=True)
    menu = one(html, f"#notification-{row.id} details.menu")
    assert [b.get_text() for b in menu.select("button[name=choice]")] == [
        "Snooze for 1 hour",
        "Until tomorrow 9:00",
        "Until next Monday 9:00",
    ]
    picker = one(menu, "input[type=datetime-local][name=until]")
    local_now = _now().astimezone(TOKYO).replace(tzinfo=None)
    low = datetime.fromisoformat(picker["min"])
    assert timedelta(0) < low - local_now <= timedelta(minutes=2)  # the picker's bounds are Tokyo time
    for form in menu.select("form"):
        assert form["method"] == "post" and form.select_one("input[name=csrf_token]")
    page = client.get(f"/inbox/notifications/{row.id}/snooze").get_data(as_text=True)
    assert "Snooze “Deploy done”" in page and one(page, "input#snooze-until")


def test_over_htmx_the_row_leaves_and_the_badge_and_status_come_out_of_band(client, member, htmx, toasts):
    row = NotificationFactory(user_id=member.id, title="Review requested")
    response = client.post(f"/inbox/notifications/{row.id}/snooze", data={"choice": "monday"}, headers=htmx())
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert parse(html).select("li.item") == []  # swapped for nothing: the row leaves the list
    assert one(html, "#inbox-badge")["hx-swap-oob"] == "true" and one(html, "#inbox-badge").get_text() == ""
    status = one(html, "#inbox-status").get_text()
    assert status.startswith("Snoozed “Review requested” until Mon") and "9:00\u202fAM JST" in status
    assert _row(row.id).snoozed_until == datetime.combine(
        (_now().astimezone(TOKYO) + timedelta(days=(7 - _now().astimezone(TOKYO).weekday()) % 7 or 7)).date(),
        datetime.min.time().replace(hour=9),
        tzinfo=TOKYO,
    )


def test_a_picked_time_is_read_in_the_users_zone(client, member, htmx):
    row = NotificationFactory(user_id=member.id)
    wanted = (_now() + timedelta(days=2)).astimezone(TOKYO).replace(second=0, microsecond=0)
    response = client.post(
        f"/inbox/notifications/{row.id}/snooze", data={"until": wanted.strftime("%Y-%m-%dT%H:%M")}, headers=htmx()
    )
    assert response.status_code == 200
    assert _row(row.id).snoozed_until == wanted


@pytest.mark.parametrize(
    ("until", "message"),
    [("past", "already passed"), ("far", "at most 90 days"), ("", "Pick a date and time")],
)
def test_a_refused_time_is_explained_in_place_and_changes_nothing(client, member, htmx, csrf, toasts, until, message):
    row = NotificationFactory(user_id=member.id, title="Invoice")
    local = _now().astimezone(TOKYO)
    value = {
        "past": (local - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"),
        "far": (local + timedelta(days=91)).strftime("%Y-%m-%dT%H:%M"),
        "": "",
    }[until]
    fragment = client.post(f"/inbox/notifications/{row.id}/snooze", data={"until": value}, headers=htmx())
    assert fragment.status_code == 422
    html = fragment.get_data(as_text=True)
    assert one(html, f"li#notification-{row.id} details.menu").has_attr("open")
    assert message in one(html, f"#snooze-error-{row.id}").get_text()
    assert one(html, f"#snooze-until-{row.id}")["aria-invalid"] == "true"

    page = client.post(f"/inbox/notifications/{row.id}/snooze", data={"until": value}, headers=csrf())
    assert page.status_code == 422 and "<html" in page.get_data(as_text=True)
    assert message in one(page.get_data(as_text=True), "#snooze-error").get_text()
    assert _row(row.id)[:2] == (None, None) and toasts == []


def test_an_archived_row_cannot_be_snoozed(client, member, htmx):
    row = NotificationFactory(user_id=member.id, read_at=_now(), archived_at=_now())
    assert (
        client.post(f"/inbox/notifications/{row.id}/snooze", data={"choice": "hour"}, headers=htmx()).status_code == 422
    )
    assert _row(row.id).snoozed_until is None


def test_unsnooze_wakes_the_row_now_on_top_and_unread(client, member, htmx, toasts):
    old = NotificationFactory(user_id=member.id, title="Old", created_at=_now() - timedelta(days=3))
    NotificationFactory(user_id=member.id, title="Newer", created_at=_now() - timedelta(hours=1))
    service.snooze(member.id, old.id, _now() + timedelta(days=1))
    assert _listed(client) == ["Newer"]

    response = client.post(f"/inbox/notifications/{old.id}/unsnooze", headers=htmx())
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert parse(html).select("li.item") == [] and one(html, "#inbox-badge").get_text() == "2"
    assert one(html, "#inbox-status").get_text() == "“Old” is back in your inbox."
    assert _row(old.id) == (None, None, _now())
    assert _listed(client) == ["Old", "Newer"]
    assert toasts[-1] == ([member.id], None)
    again = client.post(f"/inbox/notifications/{old.id}/unsnooze", headers=htmx())
    assert one(again.get_data(as_text=True), "#inbox-status").get_text() == "“Old” was not snoozed."


def test_unsnooze_without_javascript_redirects_back(client, member, csrf):
    row = NotificationFactory(user_id=member.id)
    service.snooze(member.id, row.id, _now() + timedelta(hours=2))
    response = client.post(
        f"/inbox/notifications/{row.id}/unsnooze", data={"next": "/inbox?filter=snoozed"}, headers=csrf()
    )
    assert response.status_code == 303 and response.headers["Location"] == "/inbox?filter=snoozed"
    assert _row(row.id).snoozed_until is None


@pytest.mark.parametrize("action", ["snooze", "unsnooze", "mute"])
def test_another_users_row_is_404_and_unchanged(client, member, htmx, toasts, action):
    theirs = NotificationFactory(user_id=UserFactory().id, group_key="post:1")
    if action == "unsnooze":
        service.snooze(theirs.user_id, theirs.id, _now() + timedelta(days=1))
        toasts.clear()
    before = _row(theirs.id)
    response = client.post(f"/inbox/notifications/{theirs.id}/{action}", data={"choice": "hour"}, headers=htmx())
    assert response.status_code == 404
    assert _row(theirs.id) == before and toasts == []
    assert db.session.execute(sa.text("SELECT count(*) FROM notification_mutes")).scalar() == 0
    assert client.get(f"/inbox/notifications/{theirs.id}/snooze").status_code == 404


@pytest.mark.parametrize("action", ["snooze", "unsnooze", "mute"])
def test_posts_without_a_csrf_token_are_refused(client, member, toasts, action):
    row = NotificationFactory(user_id=member.id, group_key="post:1")
    response = client.post(
        f"/inbox/notifications/{row.id}/{action}", data={"choice": "hour"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 400
    assert _row(row.id)[:2] == (None, None) and toasts == []
    assert db.session.execute(sa.text("SELECT count(*) FROM notification_mutes")).scalar() == 0


def test_unknown_filter_message_names_snoozed(client, member):
    assert b"snoozed" in client.get("/inbox?filter=starred").data


# --- waking -----------------------------------------------------------------------------------------


def test_the_sweeper_wakes_due_rows_on_top_unread_with_a_badge_event_and_a_toast(app, toasts):
    user, other = UserFactory(), UserFactory()
    due = NotificationFactory(user_id=user.id, title="Call back", created_at=_now() - timedelta(days=2))
    later = NotificationFactory(user_id=user.id, title="Later")
    fresh = NotificationFactory(user_id=user.id, title="Fresh", created_at=_now() - timedelta(minutes=5))
    two = [NotificationFactory(user_id=other.id, title=f"Theirs {n}") for n in range(2)]
    service.snooze(user.id, due.id, _now() + timedelta(hours=1))
    service.snooze(user.id, later.id, _now() + timedelta(hours=1))
    for row in two:
        service.snooze(other.id, row.id, _now() + timedelta(hours=1))
    assert queries.badge_count(user.id) == 1  # only "Fresh": snoozed rows are out of the badge
    db.session.execute(
        sa.text("UPDATE notifications SET snoozed_until = now() - interval '1 second' WHERE id = ANY(:ids)"),
        {"ids": [due.id, *(r.id for r in two)]},
    )
    commit().wait()  # the snoozes' own badge events go out now, before the pass
    toasts.clear()

    assert sweep_once()["woken"] == 3

    assert _row(due.id) == (None, None, _now())
    assert _row(later.id).snoozed_until is not None
    assert [r["title"] for r in queries.notification_page(user.id).rows] == ["Call back", "Fresh"]
    assert queries.badge_count(user.id) == 2 and queries.badge_count(other.id) == 2
    assert sorted(toasts) == [
        ([user.id], "Back from snooze: Call back"),
        ([other.id], "2 snoozed notifications are back"),
    ]
    assert sweep_once()["woken"] == 0 and fresh.id


def test_waking_is_batched_and_leaves_an_archived_row_read(app):
    user = UserFactory()
    rows = [NotificationFactory(user_id=user.id) for _ in range(3)]
    for row in rows:
        service.snooze(user.id, row.id, _now() + timedelta(hours=1))
    db.session.execute(
        sa.text("UPDATE notifications SET snoozed_until = now() - interval '1 minute' WHERE user_id = :u"),
        {"u": user.id},
    )
    db.session.execute(sa.text("UPDATE notifications SET archived_at = now() WHERE id = :id"), {"id": rows[0].id})
    assert service.wake_due(limit=2) == 2
    assert service.wake_due(limit=2) == 1
    assert _row(rows[0].id).read_at is not None  # archived while snoozed: it wakes read
    assert service.wake_due(limit=2) == 0


def test_the_back_from_snooze_toast_speaks_the_users_saved_language(app):
    from app.inbox.service import _back_toast

    assert _back_toast(["会議"], "ja") == "スヌーズから戻りました：会議"
    assert _back_toast(["a", "b"], "ja-JP") == "スヌーズしていた通知 2 件が戻りました"
    assert _back_toast(["Call back"], None) == "Back from snooze: Call back"
