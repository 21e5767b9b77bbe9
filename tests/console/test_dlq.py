"""The DLQ page: filters, replay one, discard with a reason, replay/discard all matching with a progress bar."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db, redis
from app.models import BulkOperation, NotificationDelivery
from jobs import bulk
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.html import attrs, first, one, texts


@pytest.fixture
def dlq():
    """Failed deliveries: three refused by smtp (comment), one rejected (otp), one sent (not in the DLQ)."""
    comment = NotificationTypeFactory(type="comment", label="Comments")
    otp = NotificationTypeFactory(type="otp", label="Codes", priority="high")

    def make(type_, status="failed", kind="refused"):
        note = NotificationFactory(user_id=UserFactory().id, type=type_.type)
        return DeliveryFactory(
            notification_id=note.id,
            channel="email",
            status=status,
            attempts=3,
            provider="smtp",
            error_kind=kind if status == "failed" else None,
            last_error=f"{kind} by the server",
        )

    return {
        "refused": [make(comment) for _ in range(3)],
        "rejected": make(otp, kind="rejected"),
        "sent": make(comment, status="sent"),
    }


@pytest.fixture
def enqueues(monkeypatch):
    """Record what the DLQ views enqueue after their commit."""
    calls = {"deliveries": [], "bulk": []}
    monkeypatch.setattr("app.queueing.enqueue_deliveries", lambda *a: calls["deliveries"].append(a) or True)
    monkeypatch.setattr(
        "app.queueing.enqueue_unless_alive", lambda queue, func, arg, *rest: calls["bulk"].append(arg) or True
    )
    return calls


def _rows(page: str) -> list[int]:
    """The delivery ids of the DLQ table's rows, in order."""
    return [int(row_id.removeprefix("dlq-")) for row_id in attrs(page, "#dlq-rows tbody tr", "id")]


def _status(delivery) -> str:
    db.session.expire_all()
    return db.session.get(NotificationDelivery, (delivery.id, delivery.user_id)).status


def test_the_dlq_lists_failed_rows_and_filters_them(client, operator, dlq):
    everything = client.get("/console/dlq").get_data(as_text=True)
    assert sorted(_rows(everything)) == sorted([d.id for d in dlq["refused"]] + [dlq["rejected"].id])
    assert texts(everything, "#dlq-matching") == ["4"]
    assert texts(everything, "#bulk-title") == ["4 failed deliveries match (the whole queue)"]
    assert one(everything, '#error_kind option[value="refused"]').get_text() == "refused (3)"

    by_kind = client.get("/console/dlq?error_kind=rejected").get_data(as_text=True)
    by_type = client.get("/console/dlq?type=comment&provider=smtp").get_data(as_text=True)

    assert _rows(by_kind) == [dlq["rejected"].id]
    assert sorted(_rows(by_type)) == sorted(d.id for d in dlq["refused"])
    assert _rows(client.get("/console/dlq?until=2000-01-01T00:00").get_data(as_text=True)) == []
    assert client.get("/console/dlq?since=soon").status_code == 422


def test_replay_one_enqueues_it_on_its_priority_after_the_commit(client, csrf, operator, dlq, enqueues, audit_rows):
    row = dlq["rejected"]

    response = client.post(
        f"/console/dlq/{row.id}/replay", headers=csrf(), data={"next": "/console/dlq?error_kind=rejected"}
    )

    assert response.status_code == 302 and response.location.endswith("/console/dlq?error_kind=rejected")
    assert _status(row) == "pending" and enqueues["deliveries"] == [("high", "email", [row.id])]
    assert audit_rows("dlq.replay")[0].target_id == str(row.id)
    again = client.post(f"/console/dlq/{row.id}/replay", headers=csrf(), follow_redirects=True)
    assert "not in the dead-letter queue" in again.get_data(as_text=True) and len(enqueues["deliveries"]) == 1


def test_a_foreign_next_is_ignored(client, csrf, operator, dlq, enqueues):
    response = client.post(
        f"/console/dlq/{dlq['rejected'].id}/replay", headers=csrf(), data={"next": "https://evil.example/console/"}
    )

    assert response.location.endswith("/console/dlq")


def test_discard_needs_a_reason(client, csrf, operator, dlq, audit_rows):
    row = dlq["refused"][0]

    refused = client.post(f"/console/dlq/{row.id}/discard", headers=csrf(), data={"reason": " "}, follow_redirects=True)
    assert "Say why" in refused.get_data(as_text=True) and _status(row) == "failed"

    client.post(f"/console/dlq/{row.id}/discard", headers=csrf(), data={"reason": "user left"})

    assert _status(row) == "skipped"
    assert audit_rows("dlq.discard")[0].after["skip_reason"] == "discarded: user left"


def test_replay_all_matching_runs_as_a_job_with_a_progress_bar(client, csrf, operator, dlq, enqueues, audit_rows):
    response = client.post("/console/dlq/bulk", headers=csrf(), data={"kind": "replay", "error_kind": "refused"})

    operation = db.session.scalars(sa.select(BulkOperation)).one()
    assert response.status_code == 302 and f"#operation-{operation.id}" in response.location
    assert "error_kind=refused" in response.location
    assert enqueues["bulk"] == [operation.id] and (operation.status, operation.total) == ("queued", 3)
    assert operation.filters["error_kind"] == "refused"
    fragment = client.get(f"/console/dlq/operations/{operation.id}/progress").get_data(as_text=True)
    assert first(fragment)["hx-trigger"] == "every 1s" and texts(fragment, ".ops-progress__count") == ["0 of 3"]

    redis.client().flushdb()
    bulk.run_bulk_operation(operation.id)
    redis.client().flushdb()

    fragment = client.get(f"/console/dlq/operations/{operation.id}/progress").get_data(as_text=True)
    assert "hx-trigger" not in fragment and texts(fragment, ".ops-progress__count") == ["3 of 3"]
    assert one(fragment, "progress")["value"] == "100"
    assert all(_status(d) == "pending" for d in dlq["refused"]) and _status(dlq["rejected"]) == "failed"
    assert [e.action for e in audit_rows() if e.action.startswith("dlq.")] == ["dlq.replay_all", "dlq.replay_all.done"]
    page = client.get("/console/dlq").get_data(as_text=True)
    assert one(page, f"#bulk-operations > #operation-{operation.id}") and _rows(page) == [dlq["rejected"].id]


def test_discard_all_needs_a_reason_and_an_empty_match_is_refused(client, csrf, operator, dlq, enqueues):
    no_reason = client.post("/console/dlq/bulk", headers=csrf(), data={"kind": "discard"}, follow_redirects=True)
    nothing = client.post(
        "/console/dlq/bulk", headers=csrf(), data={"kind": "replay", "error_kind": "timeout"}, follow_redirects=True
    )

    assert "Say why" in no_reason.get_data(as_text=True)
    assert "Nothing in the dead-letter queue matches" in nothing.get_data(as_text=True)
    assert db.session.scalars(sa.select(BulkOperation)).first() is None and enqueues["bulk"] == []


def test_members_cannot_touch_the_dlq(client, csrf, member, dlq):
    assert client.get("/console/dlq").status_code == 403
    assert client.post(f"/console/dlq/{dlq['rejected'].id}/replay", headers=csrf()).status_code == 403
    assert _status(dlq["rejected"]) == "failed"


def test_the_dlq_searches_error_text_and_filters_by_channel(client, operator, dlq):
    rejected = dlq["rejected"]
    page = client.get("/console/dlq?q=REJECTED+by").get_data(as_text=True)
    assert _rows(page) == [rejected.id]
    assert _rows(client.get("/console/dlq?q=%25+by").get_data(as_text=True)) == []  # % is a literal
    assert len(_rows(client.get("/console/dlq?channel=email").get_data(as_text=True))) == 4
    nothing = client.get("/console/dlq?channel=push")
    assert _rows(nothing.get_data(as_text=True)) == []
    assert "No failed deliveries match these filters." in nothing.get_data(as_text=True)
    bad = client.get("/console/dlq?channel=pigeon")
    assert bad.status_code == 422 and "The channel must be one of" in bad.get_data(as_text=True)


def test_a_bulk_operation_keeps_the_search_and_channel(client, csrf, operator, dlq, enqueues):
    response = client.post(
        "/console/dlq/bulk", headers=csrf(), data={"kind": "replay", "q": "rejected", "channel": "email"}
    )
    assert response.status_code == 302 and "q=rejected" in response.location and "channel=email" in response.location
    operation = db.session.scalars(sa.select(BulkOperation)).one()
    assert (operation.total, operation.filters["q"], operation.filters["channel"]) == (1, "rejected", "email")
    bulk.run_bulk_operation(operation.id)
    assert _status(dlq["rejected"]) == "pending" and _status(dlq["refused"][0]) == "failed"
