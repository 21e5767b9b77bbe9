"""The console edits types' and announcements' words side by side: the base text beside its Japanese (issue 33)."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.models import Announcement, NotificationType
from tests.factories import AnnouncementFactory, NotificationTypeFactory
from tests.support.html import one, parse


def _type(key: str) -> NotificationType:
    db.session.expire_all()
    return db.session.get(NotificationType, key)


def test_a_type_is_edited_with_its_japanese_beside_the_base_text(client, csrf, operator, audit_rows):
    NotificationTypeFactory(type="comment", label="Comment", description="Someone commented.")
    page = parse(client.get("/console/types/comment/edit").data)
    columns = page.select(".locale-columns > fieldset.locale-column")
    assert [c.select_one("legend").get_text(strip=True) for c in columns] == ["English: the base text", "日本語"]
    assert columns[0].select_one("#label")["value"] == "Comment"
    assert columns[1].select_one("#label_ja")["lang"] == "ja" and columns[1].select_one("#description_ja")
    data = {"key": "comment", "label": "Comment", "description": "Someone commented.", "priority": "default",
            "channel_mode": "all", "sms_max_segments": "3", "default_in_app": "y",
            "label_ja": "コメント", "description_ja": ""}  # fmt: skip
    assert client.post("/console/types/comment/edit", headers=csrf(), data=data).status_code == 302
    assert _type("comment").locales == {"ja": {"label": "コメント"}}  # the empty description is no variant
    (entry,) = audit_rows("type.update")
    assert entry.before["locales"] == {} and entry.after["locales"] == {"ja": {"label": "コメント"}}
    assert one(client.get("/console/types/comment/edit").data, "#label_ja")["value"] == "コメント"
    # A variant longer than the base may be is refused and changes nothing.
    response = client.post("/console/types/comment/edit", headers=csrf(), data=data | {"label_ja": "長" * 201})
    assert response.status_code == 422 and one(response.data, "#label_ja")["aria-invalid"] == "true"
    assert _type("comment").locales == {"ja": {"label": "コメント"}}
    # Japanese search words find the type in the console's list.
    assert one(client.get("/console/types?q=コメント").data, "tbody tr")


def test_an_announcement_gets_its_japanese_and_loses_it_when_emptied(client, csrf, operator, broadcasts):
    data = {"title": "Maintenance", "body": "Down at 22:00.", "body_format": "plain", "publish": "now",
            "title_ja": "メンテナンス", "body_ja": "22時に停止します。"}  # fmt: skip
    assert client.post("/console/announcements/new", headers=csrf(), data=data).status_code == 302
    item = db.session.scalars(sa.select(Announcement)).one()
    assert item.locales == {"ja": {"title": "メンテナンス", "body": "22時に停止します。"}}
    edit = client.get(f"/console/announcements/{item.id}/edit").data
    assert (
        one(edit, "#title_ja")["value"] == "メンテナンス"
        and one(edit, "#body_ja").get_text().strip() == "22時に停止します。"
    )
    emptied = data | {"title_ja": "", "body_ja": ""}
    assert client.post(f"/console/announcements/{item.id}/edit", headers=csrf(), data=emptied).status_code == 302
    db.session.expire_all()
    assert db.session.get(Announcement, item.id).locales == {}


def test_variant_lengths_are_checked_and_posts_need_their_csrf_token(client, csrf, operator, broadcasts):
    item = AnnouncementFactory(title="Hello", locales={"ja": {"title": "こんにちは"}})
    db.session.commit()
    data = {"title": "Hello", "body": "Body", "body_format": "plain", "publish": "now", "title_ja": "長" * 201}
    response = client.post(f"/console/announcements/{item.id}/edit", headers=csrf(), data=data)
    assert response.status_code == 422 and one(response.data, "#title_ja-error")
    no_token = client.post(f"/console/announcements/{item.id}/edit", data=data | {"title_ja": "変更"})
    assert no_token.status_code == 400
    db.session.expire_all()
    assert db.session.get(Announcement, item.id).locales == {"ja": {"title": "こんにちは"}}
    assert broadcasts == []
