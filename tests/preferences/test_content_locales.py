"""The preference screen in Japanese shows the types' Japanese labels and descriptions (issue 33)."""

from __future__ import annotations

from app.extensions import db
from app.models import NotificationType
from tests.support.html import texts


def test_the_matrix_in_japanese_shows_japanese_labels_and_falls_back_per_field(client, member, htmx):
    db.session.get(NotificationType, "comment").locales = {"ja": {"label": "コメント"}}
    security = db.session.get(NotificationType, "security")
    security.locales = {"ja": {"label": "セキュリティ", "description": "サインインとパスワードの変更。"}}
    member.locale = "ja-jp"
    db.session.flush()
    html = client.get("/preferences").get_data(as_text=True)
    labels = texts(html, ".pref-table tbody .pref-type")
    # A type without Japanese keeps its base label; "Reminder" has none.
    assert labels == ["コメント", "Reservation approved", "Reminder", "セキュリティ"]
    assert texts(html, "#type-security .pref-type__help") == ["サインインとパスワードの変更。"]
    # The switch a member turns answers in Japanese too (its accessible name names the type).
    fragment = client.post(
        "/preferences", data={"type": "comment", "channel": "email", "enabled": "true"}, headers=htmx()
    ).get_data(as_text=True)
    assert "コメント" in fragment and "Comment" not in fragment


def test_an_english_member_sees_the_base_labels(client, member):
    db.session.get(NotificationType, "comment").locales = {"ja": {"label": "コメント"}}
    member.locale = "en"
    db.session.flush()
    assert "Comment" in texts(client.get("/preferences").data, ".pref-table tbody .pref-type")
