"""Muted threads on the preference screen: listed with their latest title, and unmuted."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from app.extensions import db
from app.preferences import queries
from tests.factories import NotificationFactory, UserFactory
from tests.support.html import one, parse, texts


def _mute(user_id: int, group_key: str, minutes_ago: int = 0) -> None:
    db.session.execute(
        sa.text(
            "INSERT INTO notification_mutes (user_id, group_key, created_at)"
            " VALUES (:u, :g, now() - make_interval(mins => :m))"
        ),
        {"u": user_id, "g": group_key, "m": minutes_ago},
    )


def _mutes() -> list[tuple]:
    rows = db.session.execute(sa.text("SELECT user_id, group_key FROM notification_mutes ORDER BY 1, 2"))
    return [tuple(r) for r in rows]


def _now():
    return db.session.execute(sa.text("SELECT now()")).scalar()


def test_muted_threads_are_listed_newest_first_with_the_latest_title(client, member):
    NotificationFactory(
        user_id=member.id,
        type="comment",
        title="First reply",
        group_key="post:1",
        created_at=_now() - timedelta(hours=2),
    )
    NotificationFactory(user_id=member.id, type="comment", title="Latest reply", group_key="post:1")
    NotificationFactory(user_id=member.id, type="comment", title="Hidden", group_key="post:1", in_app=False)
    _mute(member.id, "post:1", minutes_ago=30)
    _mute(member.id, "post:<b>2</b>", minutes_ago=5)  # no notification left: the key names it
    _mute(UserFactory().id, "post:3")

    threads = queries.muted_threads(member.id)
    assert [(t["group_key"], t["latest_title"]) for t in threads] == [
        ("post:<b>2</b>", None),
        ("post:1", "Latest reply"),
    ]

    html = client.get("/preferences").get_data(as_text=True)
    section = one(html, "section#muted")
    assert texts(section, ".mute-list .pref-type") == ["post:<b>2</b>", "Latest reply"]
    assert "<b>2</b>" not in str(section)  # escaped
    assert "JST" in section.get_text()  # when muted, in the user's zone
    assert [b["aria-label"] for b in section.select("button")] == ["Unmute: post:<b>2</b>", "Unmute: Latest reply"]
    assert one(section, "#mutes-empty").has_attr("hidden")


def test_no_muted_threads_says_so(client, member):
    html = client.get("/preferences").get_data(as_text=True)
    assert not one(html, "#mutes-empty").has_attr("hidden") and parse(html).select(".mute-list") == []


def test_unmute_without_javascript_redirects_to_the_list(client, member, csrf):
    _mute(member.id, "post:1")
    response = client.post("/preferences/mutes/unmute", data={"group_key": "post:1"}, headers=csrf())
    assert response.status_code == 303 and response.headers["Location"].endswith("/preferences#muted")
    assert _mutes() == []


def test_unmute_over_htmx_removes_the_row_and_says_so(client, member, htmx):
    _mute(member.id, "post:1")
    _mute(member.id, "post:2")
    response = client.post("/preferences/mutes/unmute", data={"group_key": "post:1"}, headers=htmx())
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and parse(html).select("li") == []
    assert one(html, "#mutes-status").get_text() == "Unmuted thread post:1."
    assert parse(html).select("#mutes-empty") == []  # one thread is still muted
    last = client.post("/preferences/mutes/unmute", data={"group_key": "post:2"}, headers=htmx())
    assert one(last.get_data(as_text=True), "#mutes-empty")["hx-swap-oob"] == "true"
    assert _mutes() == []


def test_another_users_mute_is_404_and_stays(client, member, htmx):
    other = UserFactory()
    _mute(other.id, "post:1")
    response = client.post("/preferences/mutes/unmute", data={"group_key": "post:1"}, headers=htmx())
    assert response.status_code == 404
    assert _mutes() == [(other.id, "post:1")]


def test_unmute_without_csrf_is_refused(client, member):
    _mute(member.id, "post:1")
    assert client.post("/preferences/mutes/unmute", data={"group_key": "post:1"}).status_code == 400
    assert _mutes() == [(member.id, "post:1")]
