"""The preference screen over HTTP: the matrix, switches, the mandatory lock, quiet hours and time zone."""

import re
from datetime import time

import pytest

from app.extensions import db
from app.models import User
from tests.preferences.conftest import stored
from tests.support.html import attrs, first, one, parse, texts


def _toggle(client, headers, type_, channel, enabled):
    return client.post("/preferences", data={"type": type_, "channel": channel, "enabled": enabled}, headers=headers)


def test_page_shows_each_cell_with_its_source_and_locks_mandatory_ones(client, member):
    html = client.get("/preferences").get_data(as_text=True)
    assert {"type-comment", "type-security"} <= set(attrs(html, ".pref-table tbody tr", "id"))
    assert one(html, "#switch-comment-push")["aria-checked"] == "false"
    assert one(html, "#switch-reservation_approved-email")["aria-checked"] == "true"
    assert attrs(html, "td.pref-cell.cell--locked", "id") == [
        "pref-security-in_app",
        "pref-security-email",
        "pref-security-push",
    ]
    assert 'id="switch-security-' not in html  # no control at all for a mandatory type
    # Nothing is the user's choice yet: only the legend says "Your choice".
    page = parse(html)
    one(page, ".panel__header .source--user").decompose()
    assert "Your choice" not in str(page)
    assert attrs(html, "#timezone option[selected]", "value") == ["Asia/Tokyo"]


def test_sign_in_required(client):
    assert client.get("/preferences").status_code == 302


def test_a_change_stores_only_the_deviation_and_returning_deletes_it(client, member, htmx):
    response = _toggle(client, htmx(), "comment", "push", "on")
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    cell = first(html)
    assert (cell.name, cell["id"]) == ("td", "pref-comment-push")
    assert one(cell, "#switch-comment-push")["aria-checked"] == "true"
    assert texts(cell, ".pref-cell__source") == ["Your choice"]
    assert texts(html, "#prefs-status") == ["Push for Comment is now on."]
    assert stored(member.id) == [("comment", "push", True)]

    _toggle(client, htmx(), "comment", "push", "on")  # the same value again: still one row
    assert stored(member.id) == [("comment", "push", True)]

    html = _toggle(client, htmx(), "comment", "push", "off").get_data(as_text=True)
    assert stored(member.id) == [] and texts(html, "#pref-comment-push .pref-cell__source") == ["Default"]
    assert texts(html, "#prefs-status") == ["Push for Comment is now off (the default)."]


def test_turning_off_a_default_on_channel_stores_false(client, member, htmx):
    _toggle(client, htmx(), "reservation_approved", "email", "off")
    assert stored(member.id) == [("reservation_approved", "email", False)]


def test_without_javascript_the_switch_posts_and_redirects(client, member, csrf):
    response = _toggle(client, csrf(), "comment", "email", "on")
    assert response.status_code == 303
    assert response.headers["Location"] == "/preferences#type-comment"
    assert stored(member.id) == [("comment", "email", True)]


@pytest.mark.parametrize("enabled", ["off", "on"])
def test_a_forged_request_on_a_mandatory_type_gets_422_and_changes_nothing(client, member, htmx, enabled):
    response = _toggle(client, htmx(), "security", "email", enabled)
    assert response.status_code == 422
    assert "required" in response.get_data(as_text=True)
    assert stored(member.id) == []


@pytest.mark.parametrize(
    "form",
    [
        {"type": "comment", "channel": "fax", "enabled": "on"},
        {"type": "nope", "channel": "email", "enabled": "on"},
        {"type": "comment", "channel": "email", "enabled": "maybe"},
        {"type": "comment", "channel": "email"},
        {},
    ],
)
def test_bad_input_gets_422_and_changes_nothing(client, member, csrf, form):
    response = client.post("/preferences", data=form, headers=csrf())
    assert response.status_code == 422 and b"Traceback" not in response.data
    assert stored(member.id) == []


def test_switch_without_csrf_is_refused(client, member):
    assert _toggle(client, {}, "comment", "push", "on").status_code == 400
    assert stored(member.id) == []


def test_users_change_only_their_own_rows(client, member, htmx):
    from tests.factories import UserFactory

    other = UserFactory()
    _toggle(client, htmx(), "comment", "push", "on")
    assert stored(other.id) == []


# --- time zone and quiet hours ------------------------------------------------------------------------


def _schedule(client, headers, **form):
    return client.post("/preferences/schedule", data=form, headers=headers)


def _user(user_id):
    db.session.expire_all()
    return db.session.get(User, user_id)


def test_save_quiet_hours_and_time_zone(client, member, csrf):
    response = _schedule(client, csrf(), timezone="Europe/Berlin", quiet="on", quiet_start="22:00", quiet_end="07:30")
    assert response.status_code == 303 and response.headers["Location"] == "/preferences?saved=schedule#schedule"
    user = _user(member.id)
    assert (user.timezone, user.quiet_hours_start, user.quiet_hours_end) == ("Europe/Berlin", time(22), time(7, 30))
    html = client.get(response.headers["Location"]).get_data(as_text=True)
    assert "Saved." in html and one(html, "#quiet_start")["value"] == "22:00"
    assert attrs(html, "#timezone option[selected]", "value") == ["Europe/Berlin"]


def test_turning_quiet_hours_off_clears_both_times(client, member, csrf):
    _schedule(client, csrf(), timezone="Asia/Tokyo", quiet="on", quiet_start="23:00", quiet_end="06:00")
    _schedule(client, csrf(), timezone="Asia/Tokyo", quiet="off", quiet_start="23:00", quiet_end="06:00")
    user = _user(member.id)
    assert user.quiet_hours_start is None and user.quiet_hours_end is None


@pytest.mark.parametrize(
    "form, field",
    [
        ({"timezone": "Mars/Olympus", "quiet": "off"}, "Choose a time zone"),
        ({"timezone": "localtime", "quiet": "off"}, "Choose a time zone"),
        ({"timezone": "Asia/Tokyo", "quiet": "on", "quiet_start": "22:00", "quiet_end": ""}, "both a start and an end"),
        ({"timezone": "Asia/Tokyo", "quiet": "on", "quiet_start": "25:00", "quiet_end": "07:00"}, "both a start"),
        ({"timezone": "Asia/Tokyo", "quiet": "on", "quiet_start": "22:00+09:00", "quiet_end": "07:00"}, "both a start"),
        ({"timezone": "Asia/Tokyo", "quiet": "on", "quiet_start": "08:00", "quiet_end": "08:00"}, "different times"),
    ],
)
def test_invalid_schedule_gets_422_with_the_reason_and_changes_nothing(client, member, csrf, form, field):
    response = _schedule(client, csrf(), **form)
    html = response.get_data(as_text=True)
    assert response.status_code == 422 and field in html and "Nothing was saved." in html
    assert parse(html).select('#schedule [aria-invalid="true"]') and "<html" in html
    user = _user(member.id)
    assert (user.timezone, user.quiet_hours_start, user.quiet_hours_end) == ("Asia/Tokyo", None, None)


def test_schedule_over_htmx_returns_the_section(client, member, htmx):
    bad = _schedule(client, htmx(), timezone="Nowhere", quiet="off")
    section = first(bad.get_data(as_text=True))
    assert bad.status_code == 422 and (section.name, section["id"]) == ("section", "schedule")
    good = _schedule(client, htmx(), timezone="America/New_York", quiet="on", quiet_start="21:00", quiet_end="06:00")
    html = good.get_data(as_text=True)
    section = first(html)
    assert good.status_code == 200 and (section.name, section["id"]) == ("section", "schedule")
    assert "Saved." in html and ("EST" in html or "EDT" in html)


def test_schedule_without_csrf_is_refused(client, member):
    response = _schedule(client, {}, timezone="Europe/Berlin", quiet="off")
    assert response.status_code == 400 and _user(member.id).timezone == "Asia/Tokyo"


def test_inbox_times_follow_the_new_time_zone(client, member, csrf):
    from tests.factories import NotificationFactory

    NotificationFactory(user_id=member.id)
    assert re.fullmatch(r".+ JST", one(client.get("/inbox").get_data(as_text=True), "time[data-relative]")["title"])
    _schedule(client, csrf(), timezone="Europe/London", quiet="off")
    html = client.get("/inbox").get_data(as_text=True)
    assert " JST" not in html and re.fullmatch(r".+ (GMT|BST)", one(html, "time[data-relative]")["title"])


def test_a_channel_this_installation_cannot_send_on_gets_no_column(app, client, member, monkeypatch):
    monkeypatch.setitem(app.config, "VAPID_PRIVATE_KEY", "")  # Web Push not configured
    html = client.get("/preferences").get_data(as_text=True)

    headers = [th.get_text(strip=True) for th in parse(html).select(".pref-table thead th")]
    assert headers[1:] == ["In-app", "E-mail"]
    assert 'id="switch-comment-push"' not in html and 'id="switch-comment-email"' in html
