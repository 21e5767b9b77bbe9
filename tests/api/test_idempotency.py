"""Idempotency-Key: replay, mismatch, in flight, expiry, release on failure, scope, concurrency."""

from __future__ import annotations

import http.client
import json
import threading
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa

from app.api_keys import service as keys
from app.extensions import db
from tests.api.conftest import count, new_key, send_body
from tests.factories import NotificationTypeFactory, UserFactory


def test_same_key_same_body_replays_the_first_response(api, comment_type, recipient):
    key = new_key()
    first = api.post("/v1/notifications", send_body(recipient.external_id), idempotency_key=key)
    again = api.post("/v1/notifications", send_body(recipient.external_id), idempotency_key=key)
    assert first.status_code == again.status_code == 202
    assert "Idempotent-Replayed" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json() == first.get_json()
    assert count("notifications") == 1 and count("notification_deliveries") == 1
    assert count("idempotency_keys") == 1


def test_key_order_and_whitespace_do_not_make_a_different_request(api, comment_type, recipient):
    key = new_key()
    body = send_body(recipient.external_id)
    api.post("/v1/notifications", body, idempotency_key=key)
    reordered = json.dumps(dict(reversed(list(body.items()))), indent=2)
    again = api.post(
        "/v1/notifications", data=reordered, idempotency_key=key, headers={"Content-Type": "application/json"}
    )
    assert again.headers.get("Idempotent-Replayed") == "true"


def test_same_key_different_body_is_422(api, comment_type, recipient):
    key = new_key()
    api.post("/v1/notifications", send_body(recipient.external_id), idempotency_key=key)
    response = api.post("/v1/notifications", send_body(recipient.external_id, title="Other"), idempotency_key=key)
    assert response.status_code == 422
    assert "different request" in response.get_json()["detail"]
    assert count("notifications") == 1


def test_same_key_on_another_path_is_422(api, comment_type, recipient):
    key = new_key()
    api.put(f"/v1/users/{recipient.external_id}", {"display_name": "A"}, idempotency_key=key)
    response = api.put("/v1/users/someone-else", {"display_name": "A"}, idempotency_key=key)
    assert response.status_code == 422


def _claim_row(api_key: str, key: str, age: str, completed: bool) -> None:
    db.session.execute(
        sa.text(
            "INSERT INTO idempotency_keys (api_key_id, key, method, path, request_hash, created_at, completed_at, "
            "response_status, response_body) SELECT id, :key, 'POST', '/v1/notifications', 'old-hash', "
            "now() - CAST(:age AS interval), CASE WHEN :completed THEN now() END, CASE WHEN :completed THEN 202 END, "
            "CASE WHEN :completed THEN CAST('{\"old\": true}' AS jsonb) END FROM api_keys WHERE prefix = :prefix"
        ),
        {"key": key, "age": age, "completed": completed, "prefix": api_key[:13]},
    )


def _api_key_id(api_key: str) -> int:
    return db.session.execute(
        sa.text("SELECT id FROM api_keys WHERE prefix = :prefix"), {"prefix": api_key[:13]}
    ).scalar_one()


def test_request_while_the_first_is_in_flight_is_409(app, api, api_key, comment_type, recipient):
    key = new_key()
    # Another connection in the middle of a request with this key: its transaction holds the key's lock.
    engine = sa.create_engine(app.config["SQLALCHEMY_DATABASE_URI"], poolclass=sa.pool.NullPool)
    with engine.connect() as other:
        other.execute(
            sa.text("SELECT pg_advisory_xact_lock(hashtextextended(CAST(:id AS text) || ':' || :key, 0))"),
            {"id": _api_key_id(api_key), "key": key},
        )
        response = api.post("/v1/notifications", send_body(recipient.external_id), idempotency_key=key)
        assert response.status_code == 409
        assert int(response.headers["Retry-After"]) >= 1
        assert count("notifications") == 0 and count("idempotency_keys") == 0
        other.rollback()
    retried = api.post("/v1/notifications", send_body(recipient.external_id), idempotency_key=key)
    assert retried.status_code == 202 and retried.get_json()["created"] == 1


def test_an_unfinished_record_left_committed_is_taken_over(api, api_key, comment_type, recipient):
    # Claims are never committed unfinished now; an older version of Hato could leave such a row behind.
    key = new_key()
    _claim_row(api_key, key, "1 second", completed=False)
    response = api.post("/v1/notifications", send_body(recipient.external_id), idempotency_key=key)
    assert response.status_code == 202 and "Idempotent-Replayed" not in response.headers
    assert count("idempotency_keys", "completed_at IS NOT NULL") == 1


def test_records_older_than_24_hours_no_longer_replay(api, api_key, comment_type, recipient):
    key = new_key()
    _claim_row(api_key, key, "25 hours", completed=True)
    response = api.post("/v1/notifications", send_body(recipient.external_id), idempotency_key=key)
    assert response.status_code == 202 and "Idempotent-Replayed" not in response.headers
    assert response.get_json()["created"] == 1


def test_a_failed_request_releases_its_key(api, comment_type):
    key = new_key()
    failed = api.post("/v1/notifications", send_body("late-user"), idempotency_key=key)
    assert failed.status_code == 422
    assert count("idempotency_keys") == 0
    UserFactory(external_id="late-user")
    retried = api.post("/v1/notifications", send_body("late-user"), idempotency_key=key)
    assert retried.status_code == 202 and retried.get_json()["created"] == 1


def test_keys_are_scoped_per_api_key(client, api, comment_type, recipient):
    key = new_key()
    api.post("/v1/notifications", send_body(recipient.external_id, dedupe_key="a"), idempotency_key=key)
    other = keys.create_api_key(None, "other product")
    response = client.post(
        "/v1/notifications",
        json=send_body(recipient.external_id, dedupe_key="b"),
        headers={"Authorization": f"Bearer {other}", "Idempotency-Key": key},
    )
    assert response.status_code == 202 and "Idempotent-Replayed" not in response.headers
    assert count("notifications") == 2


@pytest.mark.parametrize("value", ["", " leading", "x" * 256, "caf\u00e9"])
def test_malformed_idempotency_key_is_400(api, comment_type, recipient, value):
    headers = {"Idempotency-Key": value.encode().decode("latin-1")}
    response = api.post("/v1/notifications", send_body(recipient.external_id), headers=headers)
    assert response.status_code == 400
    assert count("notifications") == 0


def test_put_and_delete_replay_too(api, recipient):
    put_key, delete_key, path = new_key(), new_key(), f"/v1/users/{recipient.external_id}"
    first = api.put(path, {"display_name": "Ann"}, idempotency_key=put_key)
    again = api.put(path, {"display_name": "Ann"}, idempotency_key=put_key)
    assert (first.status_code, again.status_code) == (200, 200) and again.headers["Idempotent-Replayed"] == "true"
    deleted = api.delete(path, idempotency_key=delete_key)
    replayed = api.delete(path, idempotency_key=delete_key)
    assert (deleted.status_code, replayed.status_code) == (204, 204)
    assert replayed.headers["Idempotent-Replayed"] == "true" and replayed.data == b""
    assert api.delete(path).status_code == 404


# --- concurrency against the real database --------------------------------------------------------


def _fire(base_url: str, key: str, body: dict, idempotency_key: str | None, n: int) -> list[tuple[int, dict]]:
    """Send n identical requests at once from n threads; return (status, headers) of each."""
    address = urlsplit(base_url)
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def one(i: int) -> None:
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        payload = json.dumps(body)
        barrier.wait()
        connection.request("POST", "/v1/notifications", payload, headers)
        response = connection.getresponse()
        results[i] = (response.status, dict(response.getheaders()), json.loads(response.read() or b"null"))
        connection.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def _live_rows(live_server) -> dict:
    with live_server.app_context():
        rows = {
            t: db.session.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one()
            for t in ("notifications", "notification_deliveries", "idempotency_keys")
        }
        db.session.remove()
    return rows


@pytest.fixture
def live_setup(live_server):
    """A type, a recipient and an API key committed for the live server."""
    with live_server.app_context():
        NotificationTypeFactory(type="comment", default_email=True)
        UserFactory(external_id="racer")
        key = keys.create_api_key(None, "race")
        db.session.commit()
        db.session.remove()
    return key


@pytest.mark.committed
def test_concurrent_identical_requests_with_one_key_write_one_set_of_rows(live_server, live_setup):
    results = _fire(live_server.base_url, live_setup, send_body("racer"), new_key(), n=8)
    originals = [r for r in results if r[0] == 202 and "Idempotent-Replayed" not in r[1]]
    replays = [r for r in results if r[0] == 202 and r[1].get("Idempotent-Replayed") == "true"]
    in_flight = [r for r in results if r[0] == 409]
    assert len(originals) == 1
    assert len(originals) + len(replays) + len(in_flight) == 8
    assert all(r[2] == originals[0][2] for r in replays)
    assert _live_rows(live_server) == {"notifications": 1, "notification_deliveries": 1, "idempotency_keys": 1}


@pytest.mark.committed
def test_concurrent_identical_requests_without_a_key_are_deduped(live_server, live_setup):
    results = _fire(live_server.base_url, live_setup, send_body("racer", dedupe_key="order:1"), None, n=8)
    assert [r[0] for r in results] == [202] * 8
    statuses = sorted(r[2]["results"][0]["status"] for r in results)
    assert statuses == ["created"] + ["existing"] * 7
    assert len({r[2]["results"][0]["notification_id"] for r in results}) == 1
    assert _live_rows(live_server)["notifications"] == 1
    assert _live_rows(live_server)["notification_deliveries"] == 1
