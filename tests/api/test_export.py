"""GET /v1/users/<id>/export (issue 18 item 10): the member's data as one streamed JSON document, in bounded memory."""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest
import sqlalchemy as sa

from app.api_keys.service import create_api_key
from app.extensions import db
from app.users import export
from tests.api.conftest import Api
from tests.factories import NotificationTypeFactory, UserFactory

# Committed: the stream reads in a REPEATABLE READ snapshot of its own, which a test's savepoint cannot give.
pytestmark = pytest.mark.committed


@pytest.fixture
def member():
    NotificationTypeFactory(type="comment", default_email=True)
    user = UserFactory(external_id="export-me", email="me@example.com", display_name="Me", timezone="Asia/Tokyo")
    db.session.execute(
        sa.text(
            "INSERT INTO notification_preferences (user_id, type, channel, enabled) "
            "VALUES (:u, 'comment', 'push', true)"
        ),
        {"u": user.id},
    )
    return user


def add_notifications(user, count: int, with_deliveries: bool = True, first: int = 1) -> None:
    """count notifications (set-based, numbered from first), one minute apart, with an e-mail delivery each if asked."""
    created = """INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, data, created_at,
                                         read_at)
                 SELECT :u, 'comment', 'Comment ' || g, 'A reply to your booking #' || g, '/r/' || g, 'k:' || g,
                        jsonb_build_object('n', g), now() - make_interval(mins => g),
                        CASE WHEN g % 3 = 0 THEN now() END
                 FROM generate_series(:first, :first + :count - 1) g"""
    if with_deliveries:
        created = f"""WITH created AS ({created} RETURNING id, user_id, created_at)
                      INSERT INTO notification_deliveries (notification_id, user_id, channel, status, attempts,
                                                           provider, sent_at)
                      SELECT id, user_id, 'email', 'sent', 1, 'smtp', created_at FROM created"""
    db.session.execute(sa.text(created), {"u": user.id, "count": count, "first": first})


def api_with(client, *scopes: str) -> Api:
    key = create_api_key(None, "export", scopes)
    db.session.commit()
    return Api(client, key)


def test_the_export_holds_the_profile_preferences_and_every_notification_with_its_deliveries(
    client, member, monkeypatch
):
    add_notifications(member, 25)
    other = UserFactory(external_id="someone-else")
    db.session.execute(
        sa.text(
            "INSERT INTO notifications (user_id, type, title, body, dedupe_key) VALUES (:u, 'comment', 'x', 'y', 'z')"
        ),
        {"u": other.id},
    )
    api = api_with(client, "users:read")
    monkeypatch.setattr(export, "PAGE_SIZE", 10)  # three pages

    response = api.get("/v1/users/export-me/export")

    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert "attachment" in response.headers["Content-Disposition"]
    document = json.loads(response.get_data(as_text=True))
    assert document["format"] == 1
    assert document["user"]["external_id"] == "export-me" and document["user"]["timezone"] == "Asia/Tokyo"
    assert document["preferences"] == [{"type": "comment", "channel": "push", "enabled": True}]
    notifications = document["notifications"]
    assert [n["dedupe_key"] for n in notifications] == [f"k:{g}" for g in range(1, 26)]  # newest first, no repeats
    assert notifications[0]["data"] == {"n": 1}
    assert notifications[2]["read_at"] is not None and notifications[0]["read_at"] is None
    assert all(len(n["deliveries"]) == 1 and n["deliveries"][0]["status"] == "sent" for n in notifications)
    assert "someone-else" not in response.get_data(as_text=True)


def test_the_export_names_the_topics_the_member_follows_and_their_tenants(client, member):
    from app.tenants import service as tenants
    from app.topics import service as topics

    topics.put_topic("project:42", "Project Apollo", "")
    topics.put_topic("project:7", "Someone else's", "")
    topics.change_subscribers("project:42", add=["export-me"], remove=[])
    tenants.put_tenant(None, "acme", {"name": "Acme"})
    tenants.set_member_tenants(None, member.id, ["acme"])

    document = api_with(client, "users:read").get("/v1/users/export-me/export").get_json()

    [topic] = document["topics"]
    assert (topic["key"], topic["name"], bool(topic["followed_at"])) == ("project:42", "Project Apollo", True)
    assert document["tenants"] == [{"key": "acme", "name": "Acme"}]


def test_the_export_holds_the_phone_its_consent_history_and_the_phones_without_their_tokens(client, member):
    from app.devices import service as devices

    api = api_with(client, "users:read", "users:write")
    api.put("/v1/users/export-me", {"phone": "+819012345678", "sms_opt_in": True})
    devices.register(member.id, {"platform": "ios", "token": "ab" * 32, "app_version": "2.1"})
    db.session.commit()

    response = api.get("/v1/users/export-me/export")
    document = json.loads(response.get_data(as_text=True))
    user = document["user"]
    assert (user["phone"], user["sms_opt_in"], user["sms_consent_source"]) == ("+819012345678", True, "api")
    assert [(c["phone"], c["opted_in"], c["source"]) for c in document["sms_consents"]] == [
        ("+819012345678", True, "api")
    ]
    assert [(d["platform"], d["app_version"], d["disabled"]) for d in document["devices"]] == [("ios", "2.1", False)]
    assert "ab" * 32 not in response.get_data(as_text=True)


def test_the_document_matches_the_openapi_schema(client, member):
    from app.api.export_responses import ExportOut

    add_notifications(member, 3)
    response = api_with(client, "users:read").get("/v1/users/export-me/export")
    ExportOut.model_validate_json(response.get_data())


def test_the_export_needs_users_read_and_a_member(client, member):
    UserFactory(external_id="an-operator", role="operator")
    db.session.commit()
    assert api_with(client, "users:write", "notifications:read").get("/v1/users/export-me/export").status_code == 403
    api = api_with(client, "users:read")
    assert api.get("/v1/users/nobody/export").status_code == 404
    assert api.get("/v1/users/an-operator/export").status_code == 403
    assert client.get("/v1/users/export-me/export").status_code == 401


def streamed_export(api: Api) -> tuple[int, int, int]:
    """Read the member's export chunk by chunk under tracemalloc: (rows, bytes, peak traced bytes)."""
    tracemalloc.start()
    try:
        response = api.client.get("/v1/users/export-me/export", headers=api.headers(), buffered=False)
        assert response.status_code == 200
        size = rows = 0
        tail = b""
        for chunk in response.response:
            chunk = chunk.encode() if isinstance(chunk, str) else chunk
            size += len(chunk)
            rows += chunk.count(b'"dedupe_key":')
            tail = (tail + chunk)[-2:]
        response.close()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert tail == b"]}"
    return rows, size, peak


def test_the_exports_memory_does_not_grow_with_the_members_history(client, member):
    # Bounded memory is shown by growth, not by one big run: five times the rows, the same peak. (A single
    # 100,000-row run under tracemalloc took 40-150 s of the suite for the same answer.)
    api = api_with(client, "users:read")
    add_notifications(member, 6_000)
    db.session.commit()
    small_rows, small_size, small_peak = streamed_export(api)
    add_notifications(member, 24_000, first=6_001)
    db.session.commit()
    started = time.monotonic()
    rows, size, peak = streamed_export(api)
    seconds = time.monotonic() - started

    print(
        f"export: {small_rows} rows peak {small_peak / 1e6:.1f} MB; {rows} rows ({size / 1e6:.1f} MB in "
        f"{seconds:.1f} s) peak {peak / 1e6:.1f} MB"
    )
    assert (small_rows, rows) == (6_000, 30_000)
    assert size > 5 * small_size * 0.95  # the document grew with the history …
    assert peak < small_peak * 1.25 + 1_000_000, (
        f"peak {small_peak / 1e6:.1f} MB → {peak / 1e6:.1f} MB"
    )  # … memory did not
    assert peak < 15_000_000  # and what it holds is small (most of it the process's own start-up allocations)
