"""Announcements: create, schedule, edit, publish now, expire, delete; audit; broadcast after commit."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

import sqlalchemy as sa

from app.clock import db_now
from app.extensions import db
from app.models import Announcement
from tests.factories import AnnouncementFactory
from tests.support.html import one, texts

TOKYO = ZoneInfo("Asia/Tokyo")


def _local(value) -> str:
    """What a datetime-local input sends for value, in the operator's zone (Asia/Tokyo)."""
    return value.astimezone(TOKYO).strftime("%Y-%m-%dT%H:%M")


def _only_announcement() -> Announcement:
    return db.session.scalars(sa.select(Announcement)).one()


def _titles(page: str, section: str) -> list[str]:
    """The titles listed in one section of the announcements page: active, scheduled or expired."""
    return texts(page, f"section#{section} tbody tr > td:first-child > strong")


def test_create_and_publish_now(client, csrf, operator, audit_rows, broadcasts):
    response = client.post(
        "/console/announcements/new",
        headers=csrf(),
        data={
            "title": "Maintenance on Sunday",
            "body": "We **upgrade** the database.",
            "body_format": "markdown",
            "publish": "now",
        },
    )
    assert response.status_code == 302
    item = _only_announcement()
    assert item.body_format == "markdown" and item.created_by == operator.id
    assert item.published_at <= db_now() and item.expires_at is None
    assert broadcasts == [True]
    (entry,) = audit_rows("announcement.create")
    assert entry.actor_id == operator.id and entry.target_id == str(item.id)
    assert entry.before is None and entry.after["title"] == "Maintenance on Sunday"
    page = client.get("/console/announcements").get_data(as_text=True)
    assert _titles(page, "active") == ["Maintenance on Sunday"]


def test_schedule_for_later_does_not_broadcast(client, csrf, operator, broadcasts):
    at = db_now() + timedelta(hours=2)
    response = client.post(
        "/console/announcements/new",
        headers=csrf(),
        data={
            "title": "New rooms",
            "body": "Floor 5 opens.",
            "body_format": "plain",
            "publish": "at",
            "publish_at": _local(at),
            "expires_at": _local(at + timedelta(days=1)),
        },
    )
    assert response.status_code == 302
    item = _only_announcement()
    # The form spoke Tokyo time; the row holds the same instant.
    assert abs(item.published_at - at) < timedelta(minutes=1)
    assert broadcasts == []
    page = client.get("/console/announcements").get_data(as_text=True)
    assert _titles(page, "scheduled") == ["New rooms"]


def test_bad_input_changes_nothing(client, csrf, operator, audit_rows, broadcasts):
    now = db_now()
    cases = [
        ({"title": "", "body": "b", "publish": "now"}, "This field is required"),
        ({"title": "t", "body": "b", "publish": "at"}, "Choose when to publish"),
        ({"title": "t", "body": "b", "publish": "at", "publish_at": _local(now - timedelta(hours=3))}, "has passed"),
        (
            {"title": "t", "body": "b", "publish": "now", "expires_at": _local(now - timedelta(hours=1))},
            "expiry must be",
        ),
        ({"title": "t", "body": "b", "publish": "now", "body_format": "html"}, "Not a valid choice"),
    ]
    for data, message in cases:
        response = client.post("/console/announcements/new", headers=csrf(), data=data)
        assert response.status_code == 422, data
        assert message in response.get_data(as_text=True), data
    assert db.session.scalar(sa.select(sa.func.count()).select_from(Announcement)) == 0
    assert audit_rows() == [] and broadcasts == []


def test_edit_keeps_the_original_time_of_a_live_one(client, csrf, operator, audit_rows, broadcasts):
    item = AnnouncementFactory(title="Old title")
    published = item.published_at
    form = client.get(f"/console/announcements/{item.id}/edit").get_data(as_text=True)
    assert one(form, "#announcement-form #title")["value"] == "Old title"
    response = client.post(
        f"/console/announcements/{item.id}/edit",
        headers=csrf(),
        data={"title": "New title", "body": "Body", "body_format": "plain", "publish": "now"},
    )
    assert response.status_code == 302
    db.session.refresh(item)
    assert item.title == "New title" and item.published_at == published
    assert broadcasts == [True]
    (entry,) = audit_rows("announcement.update")
    assert entry.before["title"] == "Old title" and entry.after["title"] == "New title"


def test_publish_now_expire_and_delete(client, csrf, operator, audit_rows, broadcasts):
    scheduled = AnnouncementFactory(published_at=db_now() + timedelta(days=1))
    assert client.post(f"/console/announcements/{scheduled.id}/publish", headers=csrf()).status_code == 302
    db.session.refresh(scheduled)
    assert scheduled.published_at <= db_now()
    assert client.post(f"/console/announcements/{scheduled.id}/expire", headers=csrf()).status_code == 302
    db.session.refresh(scheduled)
    assert scheduled.expires_at is not None and scheduled.expires_at <= db_now()
    page = client.get("/console/announcements").get_data(as_text=True)
    assert _titles(page, "expired") == [scheduled.title]
    assert client.post(f"/console/announcements/{scheduled.id}/delete", headers=csrf()).status_code == 302
    assert db.session.get(Announcement, scheduled.id) is None
    assert [e.action for e in audit_rows()] == ["announcement.publish", "announcement.expire", "announcement.delete"]
    assert audit_rows("announcement.delete")[0].before["title"] == scheduled.title
    # publish and expire changed inboxes; deleting an expired one did not.
    assert broadcasts == [True, True]


def test_refused_actions_say_why(client, csrf, operator, audit_rows, broadcasts):
    live = AnnouncementFactory()
    response = client.post(f"/console/announcements/{live.id}/publish", headers=csrf(), follow_redirects=True)
    assert "already published" in response.get_data(as_text=True)
    scheduled = AnnouncementFactory(published_at=db_now() + timedelta(days=1))
    response = client.post(f"/console/announcements/{scheduled.id}/expire", headers=csrf(), follow_redirects=True)
    assert "Only a live announcement can be expired" in response.get_data(as_text=True)
    response = client.post("/console/announcements/999999/delete", headers=csrf(), follow_redirects=True)
    assert "no longer exists" in response.get_data(as_text=True)
    assert audit_rows() == [] and broadcasts == []


def test_expired_section_pages_by_keyset(client, operator):
    now = db_now()
    for i in range(25):
        AnnouncementFactory(
            title=f"Expired {i:02d}", published_at=now - timedelta(days=30), expires_at=now - timedelta(hours=i + 1)
        )
    first = client.get("/console/announcements").get_data(as_text=True)
    assert _titles(first, "expired") == [f"Expired {i:02d}" for i in range(20)]
    assert "Expired 20" not in first
    older = one(first, "#expired .load-more a")["href"]
    assert "expired_cursor=" in older
    second = client.get(older.split("#")[0]).get_data(as_text=True)
    assert _titles(second, "expired") == [f"Expired {i:02d}" for i in range(20, 25)]
    assert "Expired 19" not in second


def test_markdown_preview_fragment_is_sanitized(client, csrf, operator):
    response = client.post(
        "/console/announcements/preview",
        headers={**csrf(), "HX-Request": "true"},
        data={
            "body": "## Hello\n\n<script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror=alert(1)>",
            "body_format": "markdown",
        },
    )
    html = response.get_data(as_text=True)
    assert texts(html, ".console-rendered > h2") == ["Hello"]
    assert "<script" not in html and "<img" not in html and "javascript:" not in html
    assert "&lt;script&gt;" in html


def test_the_announcement_html_filter_renders_inert_html(app):
    template = app.jinja_env.from_string("{{ a | announcement_html }}|{{ body | announcement_html('plain') }}")
    html = template.render(
        a={"body": "[t](https://example.com) <b onclick=x>b</b>", "body_format": "markdown"},
        body="<script>alert(1)</script>",
    )
    markdown_part, plain_part = html.split("|")
    link = one(markdown_part, "a")
    assert (link.attrs, link.get_text()) == ({"href": "https://example.com", "rel": ["noopener", "noreferrer"]}, "t")
    assert "&lt;b onclick=x&gt;" in markdown_part and "<b" not in markdown_part  # raw HTML is text
    assert plain_part == "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"


def test_an_announcement_with_script_shows_inert_in_the_member_inbox(client, login_as):
    from tests.factories import UserFactory

    AnnouncementFactory(
        title="Heads up", body="<script>alert('x')</script>\n\n[click](javascript:alert(1))", body_format="markdown"
    )
    login_as(UserFactory())
    page = client.get("/inbox").get_data(as_text=True)
    assert "Heads up" in page
    assert "<script>alert('x')</script>" not in page and 'href="javascript:' not in page
