"""The notify path's words in the reader's language: aggregated titles, refusals of locales and push endpoints."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from flask_babel import force_locale

from app.extensions import db
from app.locales import normalize_locale
from app.notify.service import notify
from app.providers.endpoints import EndpointPolicy, EndpointRefused
from app.refusal import Refused
from tests.factories import NotificationTypeFactory, UserFactory


def _like(user, actor: str, n: int) -> None:
    notify(
        [user.external_id],
        type_="like",
        title="いいねしました",
        body="",
        dedupe_key=f"like:{n}",
        group_key="post:1",
        actor={"id": actor.lower(), "name": actor},
    )


def _title(user) -> str:
    return db.session.scalar(sa.text("SELECT title FROM notifications WHERE user_id = :u"), {"u": user.id})


def test_aggregated_title_speaks_each_recipients_language(app):
    NotificationTypeFactory(type="like", aggregation_window=60)
    hanako, carol = UserFactory(locale="ja"), UserFactory(locale="en")
    for n, actor in enumerate(["Alice", "Bob", "Carol"]):
        for user in (hanako, carol):
            _like(user, actor, n)
    assert _title(hanako) == "Aliceほか2人：いいねしました"
    assert _title(carol) == "Alice and 2 others: いいねしました"


def test_aggregated_title_ignores_the_callers_language(app, monkeypatch):
    """The API caller's Accept-Language is not the recipient's: a user without a locale gets DEFAULT_LOCALE's."""
    NotificationTypeFactory(type="like", aggregation_window=60)
    nobody = UserFactory(locale=None)
    with app.test_request_context(headers={"Accept-Language": "ja"}):
        for n, actor in enumerate(["Alice", "Bob"]):
            _like(nobody, actor, n)
    assert _title(nobody) == "Alice and Bob: いいねしました"


def test_refusals_are_translated(app):
    with force_locale("ja"):
        with pytest.raises(Refused, match="ロケールは en、pt-br、zh-hant-tw のような形にしてください。"):
            normalize_locale("english!")
        policy = EndpointPolicy(("push.example.com", "127.0.0.1"))
        with pytest.raises(EndpointRefused, match="https の URL"):
            policy.check_url("ftp://push.example.com/x")
        with pytest.raises(
            EndpointRefused, match="evil.example は、このサーバーが送信するプッシュ通知サービスではありません"
        ):
            policy.check_url("https://evil.example/x")
        with pytest.raises(EndpointRefused, match="ループバックアドレス"):
            policy.check_url("https://127.0.0.1/x")
    with pytest.raises(EndpointRefused, match="is a loopback address, which this server never connects to"):
        EndpointPolicy(("127.0.0.1",)).check_url("https://127.0.0.1/x")
