"""Aggregation: events of one (user, type, group_key) within the type's window collapse into one row."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.inbox.queries import badge_count
from app.models import MessageTemplate
from app.notify.aggregate import actors_phrase
from app.notify.service import notify
from tests.api.conftest import api, api_key, count, new_key, send_body  # noqa: F401 (fixtures)
from tests.factories import NotificationTypeFactory, UserFactory


@pytest.fixture
def likes():
    """`like` aggregates over 60 s; in-app and e-mail on."""
    return NotificationTypeFactory(type="like", default_email=True, aggregation_window=60)


def like(user, actor: str, n: int, group_key: str = "post:1", **extra):
    return notify(
        [user.external_id],
        type_="like",
        title="liked your post",
        body="",
        dedupe_key=f"like:{n}",
        group_key=group_key,
        actor={"id": actor.lower(), "name": actor},
        **extra,
    )


def rows(user_id: int) -> list:
    return db.session.execute(
        sa.text(
            "SELECT id, title, event_count, actor_count, actor_names, read_at, window_ends_at FROM notifications"
            " WHERE user_id = :u ORDER BY created_at DESC, id DESC"
        ),
        {"u": user_id},
    ).all()


def test_events_in_one_window_collapse_into_one_row_with_count_and_actors(likes):
    author = UserFactory()
    for n, actor in enumerate(["Alice", "Bob", "Carol", "Bob", "Dave"]):
        like(author, actor, n)
    (row,) = rows(author.id)
    assert (row.event_count, row.actor_count, row.actor_names) == (5, 4, ["Alice", "Bob", "Carol"])
    assert row.title == "Alice and 3 others: liked your post"  # the plain fallback, no template
    assert count("notification_events", "notification_id = :id", id=row.id) == 5
    assert badge_count(author.id) == 1
    # one e-mail, waiting for the window's end (nothing enqueued now)
    deliveries = db.session.execute(
        sa.text("SELECT channel, status, next_attempt_at FROM notification_deliveries WHERE notification_id = :id"),
        {"id": row.id},
    ).all()
    assert [(d.channel, d.status, d.next_attempt_at) for d in deliveries] == [("email", "pending", row.window_ends_at)]


def test_other_group_keys_users_and_types_stay_apart(likes):
    author, other = UserFactory(), UserFactory()
    NotificationTypeFactory(type="plain")
    like(author, "Alice", 1, group_key="post:1")
    like(author, "Bob", 2, group_key="post:2")
    like(other, "Carol", 3, group_key="post:1")
    notify([author.external_id], type_="plain", title="t", body="", dedupe_key="p:1", group_key="post:1")
    assert len(rows(author.id)) == 3 and len(rows(other.id)) == 1


def test_a_repeated_dedupe_key_counts_once(likes):
    author = UserFactory()
    first = like(author, "Alice", 1)
    again = like(author, "Alice", 1)
    like(author, "Bob", 2)
    repeat_of_second = like(author, "Bob", 2)
    (row,) = rows(author.id)
    assert row.event_count == 2
    assert first.recipients[0].created and not again.recipients[0].created
    assert again.recipients[0].notification_id == row.id == repeat_of_second.recipients[0].notification_id


def test_an_event_after_the_window_closed_opens_a_new_row(likes):
    author = UserFactory()
    like(author, "Alice", 1)
    like(author, "Bob", 2)
    db.session.execute(sa.text("UPDATE notifications SET window_ends_at = now() - interval '1 second'"))
    like(author, "Carol", 3)
    newest, closed = rows(author.id)
    assert (closed.event_count, newest.event_count) == (2, 1)
    assert newest.title == "liked your post" and newest.window_ends_at > closed.window_ends_at


def test_a_read_row_becomes_unread_again_and_moves_to_the_top(likes):
    author = UserFactory()
    like(author, "Alice", 1)
    NotificationTypeFactory(type="plain")
    notify([author.external_id], type_="plain", title="newer", body="", dedupe_key="p:1")
    db.session.execute(
        sa.text("UPDATE notifications SET read_at = now(), created_at = created_at - interval '1 minute'")
    )
    assert badge_count(author.id) == 0
    like(author, "Bob", 2)
    top = rows(author.id)[0]
    assert top.title == "Alice and Bob: liked your post" and top.read_at is None
    assert badge_count(author.id) == 1 and count("notifications") == 2


def test_the_in_app_template_renders_count_and_actors_per_locale(likes):
    author, japanese = UserFactory(locale="en"), UserFactory(locale="ja")
    db.session.add_all(
        [
            MessageTemplate(
                type="like",
                channel="in_app",
                locale="en",
                subject="{{ first_actor }} and {{ actor_count - 1 }} others liked your post ({{ count }})",
                body_text="{{ actors | join(', ') }}",
                body_html="",
            ),
            MessageTemplate(
                type="like",
                channel="in_app",
                locale="ja",
                subject="{{ first_actor }}さん他{{ actor_count - 1 }}人",
                body_text="",
                body_html="",
            ),
        ]
    )
    db.session.flush()
    for user in (author, japanese):
        for n, actor in enumerate(["Alice", "Bob", "Carol"]):
            like(user, actor, n)
    (row,) = rows(author.id)
    body = db.session.execute(sa.text("SELECT body FROM notifications WHERE id = :id"), {"id": row.id}).scalar()
    assert row.title == "Alice and 2 others liked your post (3)" and body == "Alice, Bob, Carol"
    assert rows(japanese.id)[0].title == "Aliceさん他2人"


def test_a_broken_template_falls_back_to_the_plain_wording(likes):
    author = UserFactory()
    bad = "{{ ''.__class__.__mro__ }}"
    db.session.add(MessageTemplate(type="like", channel="in_app", locale="en", subject=bad, body_text="", body_html=""))
    db.session.flush()
    like(author, "Alice", 1)
    like(author, "Bob", 2)
    assert rows(author.id)[0].title == "Alice and Bob: liked your post"


def test_actors_phrase():
    assert actors_phrase([], 0, 4) == "4 notifications"
    assert actors_phrase(["Alice"], 1, 3) == "Alice"
    assert actors_phrase(["Alice", "Bob"], 2, 2) == "Alice and Bob"
    assert actors_phrase(["Alice", "Bob", "Carol"], 2, 2) == "Alice and Bob"
    assert actors_phrase(["Alice", "Bob", "Carol"], 3, 9) == "Alice and 2 others"


def test_types_without_a_window_keep_one_row_per_event():
    NotificationTypeFactory(type="comment")
    author = UserFactory()
    for n in range(3):
        notify([author.external_id], type_="comment", title="c", body="", dedupe_key=f"c:{n}", group_key="post:1")
    assert len(rows(author.id)) == 3 and count("notification_events") == 0


def test_a_muted_thread_joins_hidden_and_stays_read(likes):
    author = UserFactory()
    like(author, "Alice", 1)
    db.session.execute(sa.text("UPDATE notifications SET read_at = now()"))
    db.session.execute(
        sa.text("INSERT INTO notification_mutes (user_id, group_key) VALUES (:u, 'post:1')"), {"u": author.id}
    )
    like(author, "Bob", 2)
    (row,) = rows(author.id)
    assert row.event_count == 2 and row.read_at is not None and badge_count(author.id) == 0


def test_api_accepts_an_actor_and_shows_the_events(api, likes):  # noqa: F811
    author = UserFactory()
    for n, name in enumerate(["Alice", "Bob"]):
        body = send_body(author.external_id, type="like", title="liked", group_key="post:9", dedupe_key=f"l:{n}")
        response = api.post("/v1/notifications", body | {"actor": {"id": f"u{n}", "name": name}})
        assert response.status_code == 202 and response.get_json()["created"] == 1
    notification_id = response.get_json()["results"][0]["notification_id"]
    shown = api.get(f"/v1/notifications/{notification_id}").get_json()
    assert (shown["event_count"], shown["actor_count"], shown["title"]) == (2, 2, "Alice and Bob: liked")
    assert [(e["dedupe_key"], e["actor"]["name"]) for e in shown["events"]] == [("l:0", "Alice"), ("l:1", "Bob")]
    assert shown["window_ends_at"] is not None


@pytest.mark.parametrize(
    "actor",
    [{"id": "u1"}, {"id": "", "name": "A"}, {"id": "u1", "name": "x" * 201}, {"id": "u1", "name": "A", "x": 1}, "Al"],
)
def test_api_refuses_a_malformed_actor(api, likes, actor):  # noqa: F811
    author = UserFactory()
    response = api.post("/v1/notifications", send_body(author.external_id, type="like", actor=actor))
    assert response.status_code == 422 and count("notifications") == 0


def test_auto_dedupe_key_tells_actors_apart(api, likes):  # noqa: F811
    author = UserFactory()
    for name in ("Alice", "Bob", "Bob"):
        body = send_body(author.external_id, type="like", group_key="post:3", actor={"id": name, "name": name})
        assert api.post("/v1/notifications", body).status_code == 202
    assert rows(author.id)[0].event_count == 2


def test_statements_one_without_a_window_three_with_one(likes, statements):
    NotificationTypeFactory(type="comment")
    author = UserFactory()
    db.session.flush()
    statements.clear()
    notify([author.external_id], type_="comment", title="c", body="", dedupe_key="c:1", group_key="post:1")
    assert len(statements) == 1  # the one-statement ingest, group_key or not
    statements.clear()
    like(author, "Alice", 1)
    assert len(statements) == 2  # the first event keeps its words: nothing to re-render
    statements.clear()
    like(author, "Bob", 2)
    assert len(statements) == 3 and "pg_advisory_xact_lock" in statements[0]


def test_recipients_by_user_id_and_several_at_once(likes):
    first, second = UserFactory(), UserFactory()
    for n, actor in enumerate(["Alice", "Bob"]):
        result = notify(
            [second.id, first.id],
            by="user_id",
            type_="like",
            title="liked your post",
            body="",
            dedupe_key=f"like:{n}",
            group_key="post:1",
            actor={"id": actor, "name": actor},
        )
        assert [r.user_id for r in result.recipients] == [second.id, first.id]
    assert [r.event_count for r in rows(first.id)] == [2] and [r.event_count for r in rows(second.id)] == [2]


def test_unknown_recipients_write_nothing_when_strict(likes):
    from app.notify.service import NotifyError

    author = UserFactory()
    with pytest.raises(NotifyError):
        notify([author.external_id, "nobody"], type_="like", title="t", body="", dedupe_key="k", group_key="post:1")
    assert count("notifications") == 0 and count("notification_events") == 0
