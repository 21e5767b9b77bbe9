"""The feed's announcements and types in the member's locale, with the operator's variants as `locales` (issue 33)."""

from __future__ import annotations

import pytest

from app.extensions import db
from tests.factories import AnnouncementFactory, NotificationTypeFactory, UserFactory
from tests.feed.test_feed_api import _feed, _key, _token


@pytest.fixture
def issuer(client):
    """An API key that may issue user tokens."""
    return _key(client, "feed:issue")


def _content():
    AnnouncementFactory(title="Maintenance", body="Down at 22:00.", locales={"ja": {"title": "メンテナンス"}})
    NotificationTypeFactory(type="comment", label="Comment", locales={"ja": {"label": "コメント"}})


def test_a_japanese_member_gets_the_japanese_words_and_every_variant(client, issuer):
    _content()
    UserFactory(external_id="bell-user", locale="ja-jp")
    db.session.flush()
    token = _token(issuer)
    (announcement,) = _feed(client, token).get_json()["announcements"]
    assert announcement["title"] == "メンテナンス" and announcement["body"] == "Down at 22:00."  # no Japanese body
    assert announcement["locales"] == {"ja": {"title": "メンテナンス"}}
    (kind,) = _feed(client, token, path="/preferences").get_json()["types"]
    assert kind["label"] == "コメント" and kind["locales"] == {"ja": {"label": "コメント"}}


def test_without_a_saved_locale_the_request_language_chooses(client, issuer):
    _content()
    UserFactory(external_id="bell-user", locale=None)
    db.session.flush()
    token = _token(issuer)
    english = _feed(client, token, headers={"Accept-Language": "en-US"}).get_json()["announcements"][0]
    assert english["title"] == "Maintenance" and english["locales"]["ja"]["title"] == "メンテナンス"
    japanese = _feed(client, token, path="/preferences", headers={"Accept-Language": "ja"}).get_json()["types"][0]
    assert japanese["label"] == "コメント"
