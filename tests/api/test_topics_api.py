"""Topics over the API: PUT/DELETE a topic, followers added and removed in sets, keyset pages, scopes, fanouts."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.api_keys.service import create_api_key
from app.extensions import db
from app.topics import service
from tests.api.conftest import Api, count, new_key
from tests.factories import UserFactory

URL = "/v1/topics/project:42"


def make_users(n: int, prefix: str = "f") -> list[int]:
    rows = db.session.execute(
        sa.text(
            "INSERT INTO users (external_id, email, display_name) "
            "SELECT :p || '-' || g, :p || '-' || g || '@example.com', 'User ' || g "
            "FROM generate_series(1, :n) g ORDER BY g RETURNING id"
        ),
        {"p": prefix, "n": n},
    )
    return [row.id for row in rows]


@pytest.fixture
def topic(api):
    response = api.put(URL, {"name": "Project Apollo", "description": "Launch work"})
    assert response.status_code == 201
    return response.get_json()


def followers() -> list[str]:
    return list(
        db.session.execute(
            sa.text(
                "SELECT u.external_id FROM topic_subscriptions s JOIN users u ON u.id = s.user_id "
                "JOIN topics t ON t.id = s.topic_id WHERE t.key = 'project:42' ORDER BY s.user_id"
            )
        ).scalars()
    )


def test_put_creates_then_replaces_a_topic(api, topic):
    assert (topic["key"], topic["name"], topic["description"]) == ("project:42", "Project Apollo", "Launch work")

    again = api.put(URL, {"name": "Apollo"})

    assert again.status_code == 200
    assert (again.get_json()["name"], again.get_json()["description"]) == ("Apollo", "")
    assert count("topics") == 1


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x", "description": 3}, "description"),
        ({"name": "x", "y": 1}, "y"),
    ],
)
def test_a_bad_topic_is_422_and_writes_nothing(api, body, field):
    response = api.put(URL, body)
    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    assert field in {e["field"] for e in response.get_json()["errors"]}
    assert count("topics") == 0


def test_subscribers_are_added_and_removed_idempotently(api, topic):
    make_users(5)

    first = api.post(URL + "/subscribers", {"add": ["f-1", "f-2", "f-3", "f-2"]})
    again = api.post(URL + "/subscribers", {"add": ["f-1", "f-2", "f-3"]})
    removed = api.post(URL + "/subscribers", {"add": ["f-4"], "remove": ["f-1", "f-5", "nobody"]})

    assert first.get_json() == {"added": 3, "removed": 0}
    assert again.get_json() == {"added": 0, "removed": 0}
    assert removed.get_json() == {"added": 1, "removed": 1}
    assert followers() == ["f-2", "f-3", "f-4"]


def test_an_unknown_user_to_add_is_the_ingest_422_and_nothing_is_written(api, topic):
    make_users(2)

    response = api.post(URL + "/subscribers", {"add": ["f-1", "ghost", "f-2", "phantom"]})

    assert response.status_code == 422
    body = response.get_json()
    assert body["unknown_recipients"] == ["ghost", "phantom"]
    assert body["errors"][0]["field"] == "add"
    assert followers() == []


def test_more_than_ten_thousand_ids_is_422_and_nothing_is_written(api, topic):
    make_users(3)
    too_many = api.post(URL + "/subscribers", {"add": [f"f-{i}" for i in range(10_001)]})
    split = api.post(URL + "/subscribers", {"add": [f"f-{i}" for i in range(6000)],
                                           "remove": [f"g-{i}" for i in range(5000)]})  # fmt: skip
    assert too_many.status_code == 422 and split.status_code == 422
    assert "add" in {e["field"] for e in too_many.get_json()["errors"]}
    assert followers() == []


def test_one_id_in_both_lists_is_422(api, topic):
    make_users(2)
    response = api.post(URL + "/subscribers", {"add": ["f-1", "f-2"], "remove": ["f-2"]})
    assert response.status_code == 422 and response.get_json()["both"] == ["f-2"]
    assert followers() == []


def test_ten_thousand_ids_in_one_call(api, topic):
    make_users(10_000)
    response = api.post(URL + "/subscribers", {"add": [f"f-{i}" for i in range(1, 10_001)]})
    assert response.status_code == 200 and response.get_json()["added"] == 10_000
    assert count("topic_subscriptions") == 10_000


def test_an_unknown_topic_is_404(api):
    make_users(1)
    assert api.post("/v1/topics/nope/subscribers", {"add": ["f-1"]}).status_code == 404
    assert api.get("/v1/topics/nope/subscribers").status_code == 404
    assert api.delete("/v1/topics/nope").status_code == 404
    assert count("topic_subscriptions") == 0


def test_subscribers_are_keyset_paged(api, topic):
    make_users(7)
    api.post(URL + "/subscribers", {"add": [f"f-{i}" for i in range(1, 8)]})

    seen, cursor, pages = [], None, 0
    while True:
        response = api.get(URL + "/subscribers?limit=3" + (f"&cursor={cursor}" if cursor else ""))
        assert response.status_code == 200
        body = response.get_json()
        seen += [row["external_id"] for row in body["subscribers"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break

    assert seen == [f"f-{i}" for i in range(1, 8)] and pages == 3
    bad = api.get(URL + "/subscribers?cursor=abc")
    assert bad.status_code == 422 and bad.get_json()["errors"][0]["field"] == "cursor"
    assert api.get(URL + "/subscribers?limit=1001").status_code == 422


def test_a_users_topics(api, topic):
    make_users(2)
    api.put("/v1/topics/project:7", {"name": "Project Seven"})
    api.post(URL + "/subscribers", {"add": ["f-1"]})
    api.post("/v1/topics/project:7/subscribers", {"add": ["f-1", "f-2"]})

    response = api.get("/v1/users/f-1/topics")

    assert response.status_code == 200
    assert [t["key"] for t in response.get_json()["topics"]] == ["project:42", "project:7"]
    assert [t["name"] for t in api.get("/v1/users/f-2/topics").get_json()["topics"]] == ["Project Seven"]
    assert api.get("/v1/users/ghost/topics").status_code == 404


def test_delete_removes_the_topic_and_its_followers(api, topic):
    make_users(3)
    api.post(URL + "/subscribers", {"add": ["f-1", "f-2", "f-3"]})

    assert api.delete(URL).status_code == 204

    assert count("topics") == 0 and count("topic_subscriptions") == 0
    assert api.delete(URL).status_code == 404


@pytest.mark.parametrize(
    ("scopes", "method", "path", "body"),
    [
        (["topics:read"], "PUT", URL, {"name": "x"}),
        (["topics:read"], "DELETE", URL, None),
        (["topics:read"], "POST", URL + "/subscribers", {"add": ["f-1"]}),
        (["topics:write"], "GET", URL + "/subscribers", None),
        (["topics:write"], "GET", "/v1/users/f-1/topics", None),
        (["notifications:write"], "POST", URL + "/subscribers", {"add": ["f-1"]}),
    ],
)
def test_a_key_without_the_scope_is_403_and_changes_nothing(client, topic, scopes, method, path, body):
    make_users(1)
    limited = Api(client, create_api_key(None, "limited", scopes))

    response = limited.call(method, path, body)

    assert response.status_code == 403
    assert response.get_json()["scope"] in ("topics:read", "topics:write")
    assert count("topics") == 1 and count("topic_subscriptions") == 0


def test_the_read_scope_reads(client, topic):
    reader = Api(client, create_api_key(None, "reader", ["topics:read"]))
    UserFactory(external_id="r-1")
    assert reader.get(URL + "/subscribers").status_code == 200
    assert reader.get("/v1/users/r-1/topics").status_code == 200


def test_a_bad_key_in_the_url_is_422(api):
    response = api.put("/v1/topics/" + "k" * 201, {"name": "x"})
    assert response.status_code == 422 and count("topics") == 0


def test_the_same_idempotency_key_replays_a_subscribers_call(api, topic):
    make_users(2)
    key = new_key()
    first = api.post(URL + "/subscribers", {"add": ["f-1", "f-2"]}, idempotency_key=key)
    api.post(URL + "/subscribers", {"remove": ["f-1", "f-2"]})
    replay = api.post(URL + "/subscribers", {"add": ["f-1", "f-2"]}, idempotency_key=key)
    assert replay.get_json() == first.get_json() == {"added": 2, "removed": 0}
    assert replay.headers.get("Idempotent-Replayed") == "true"
    assert followers() == []


def test_the_service_limit_is_the_documented_one():
    assert service.MAX_SUBSCRIBERS_PER_CALL == 10_000
