"""Attack: get a sign-in link back out of the idempotency store. Issue 14, item 14.

POST /v1/users/<id>/login-links with an Idempotency-Key used to store the whole 201 body (the link
that signs the member in) in idempotency_keys for 24 hours: anyone who can read that table (a
backup, a read replica, a support query) or who replays the key with the same API key got a working
link to the member's inbox. Now the body is never stored and a replay answers 409.
"""

from __future__ import annotations

import json
import uuid
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa

from app.api_keys import service as keys
from app.extensions import db
from tests.api.conftest import Api, count
from tests.factories import UserFactory


@pytest.fixture
def sso(client) -> Api:
    """The product's sign-in service: the one key allowed to mint links."""
    key = keys.create_api_key(None, "sso")
    db.session.execute(  # every scope (the upgrade gives old keys all four), links:create among them
        sa.text("UPDATE api_keys SET scopes = '{notifications:write,notifications:read,users:write,links:create}'")
    )
    return Api(client, key)


@pytest.fixture
def member():
    return UserFactory(external_id=f"member-{uuid.uuid4().hex[:8]}")


def _table_dump() -> str:
    """Every column of every idempotency record, as text: what a backup or a replica holds."""
    rows = db.session.execute(sa.text("SELECT row_to_json(i)::text FROM idempotency_keys i")).scalars()
    return "\n".join(rows)


def _mint(sso: Api, member, idempotency_key: str):
    return sso.post(f"/v1/users/{member.external_id}/login-links", idempotency_key=idempotency_key)


def test_the_link_never_lands_in_the_idempotency_store(sso, member):
    idempotency_key = str(uuid.uuid4())
    response = _mint(sso, member, idempotency_key)
    assert response.status_code == 201
    url = response.get_json()["url"]
    token = urlsplit(url).path.rsplit("/", 1)[1]
    record = (
        db.session.execute(
            sa.text("SELECT response_status, response_body, completed_at FROM idempotency_keys WHERE key = :k"),
            {"k": idempotency_key},
        )
        .mappings()
        .one()
    )
    assert record["response_status"] == 201 and record["completed_at"] is not None  # the key is still spent
    assert record["response_body"] is None
    dump = _table_dump()
    assert token not in dump and url not in dump and "/login/link/" not in dump and "expires_at" not in dump


def test_a_replay_cannot_obtain_the_link(sso, member, client, csrf):
    idempotency_key = str(uuid.uuid4())
    first = _mint(sso, member, idempotency_key)
    link_path = urlsplit(first.get_json()["url"]).path
    for _ in range(3):
        replay = _mint(sso, member, idempotency_key)
        assert replay.status_code == 409
        assert replay.mimetype == "application/problem+json"
        body = replay.get_json()
        assert body["type"].endswith("already_issued") and "cannot be shown again" in body["detail"]
        assert "url" not in body and link_path not in replay.get_data(as_text=True)
        assert "Idempotent-Replayed" not in replay.headers
    assert count("login_links") == 1  # a replay mints no second link either
    # the link the caller did receive still works, once
    assert client.post(link_path, headers=csrf()).status_code == 302


def test_a_record_stored_by_the_old_code_is_not_served(sso, member):
    """Rows written before the fix (up to 24 h old) hold the link: a replay must not hand it out."""
    idempotency_key = str(uuid.uuid4())
    _mint(sso, member, idempotency_key)
    old_body = {"url": "https://hato.example/login/link/leaked-token", "expires_at": "2030-01-01T00:00:00Z"}
    db.session.execute(
        sa.text("UPDATE idempotency_keys SET response_body = CAST(:b AS jsonb) WHERE key = :k"),
        {"b": json.dumps(old_body), "k": idempotency_key},
    )
    replay = _mint(sso, member, idempotency_key)
    assert replay.status_code == 409 and b"leaked-token" not in replay.data


def test_the_same_key_for_another_member_is_refused_not_answered_with_a_link(sso, member):
    idempotency_key = str(uuid.uuid4())
    _mint(sso, member, idempotency_key)
    other = UserFactory(external_id=f"other-{uuid.uuid4().hex[:8]}")
    response = _mint(sso, other, idempotency_key)
    assert response.status_code == 422 and "url" not in response.get_json()
    assert count("login_links") == 1


def test_a_new_idempotency_key_gets_a_new_link(sso, member):
    first = _mint(sso, member, str(uuid.uuid4())).get_json()["url"]
    second = _mint(sso, member, str(uuid.uuid4()))
    assert second.status_code == 201 and second.get_json()["url"] != first
    assert "/login/link/" not in _table_dump()
