"""The delivery log: filters, keyset pages, one delivery's attempt timeline and rendered content."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import DeliveryAttempt
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.html import attrs, definitions, one, parse, texts


@pytest.fixture
def ledger():
    """Two users, two types, deliveries in several states; return them by name."""
    comment = NotificationTypeFactory(type="comment", label="Comments")
    otp = NotificationTypeFactory(type="otp", label="Codes", priority="high")
    ada = UserFactory(external_id="ada", email="Ada@Example.com")
    bob = UserFactory(external_id="bob", email="bob@example.com")
    n1 = NotificationFactory(user_id=ada.id, type=comment.type, title="Hi Ada")
    n2 = NotificationFactory(user_id=bob.id, type=otp.type, title="Your code")
    rows = {
        "ada_email": DeliveryFactory(
            notification_id=n1.id,
            channel="email",
            status="sent",
            attempts=2,
            provider="smtp",
            rendered_subject="Hi Ada",
            rendered_body="<script>alert(1)</script><b>Hello</b>",
        ),
        "ada_push": DeliveryFactory(
            notification_id=n1.id, channel="push", status="skipped", skip_reason="no_push_subscription"
        ),
        "bob_email": DeliveryFactory(
            notification_id=n2.id,
            channel="email",
            status="failed",
            attempts=8,
            provider="smtp",
            error_kind="exhausted",
            last_error="connection refused",
        ),
    }
    db.session.add_all(
        [
            DeliveryAttempt(
                delivery_id=rows["ada_email"].id,
                user_id=ada.id,
                provider="smtp",
                duration_ms=5003,
                outcome="transient",
                error="timeout: timed out",
            ),
            DeliveryAttempt(
                delivery_id=rows["ada_email"].id, user_id=ada.id, provider="smtp", duration_ms=42, outcome="sent"
            ),
        ]
    )
    db.session.flush()
    return rows


def _ids(page: str) -> list[int]:
    """The delivery ids of the log's rows, in order."""
    return [int(row_id.removeprefix("delivery-")) for row_id in attrs(page, "#delivery-log tbody tr", "id")]


@pytest.mark.parametrize(
    "query, expected",
    [
        ("", ["bob_email", "ada_push", "ada_email"]),
        ("user=ada", ["ada_push", "ada_email"]),
        ("user=ADA@example.com", ["ada_push", "ada_email"]),
        ("user=nobody", []),
        ("type=otp", ["bob_email"]),
        ("channel=push", ["ada_push"]),
        ("status=failed", ["bob_email"]),
        ("user=bob&status=sent", []),
    ],
)
def test_filters(client, operator, ledger, query, expected):
    page = client.get(f"/console/deliveries?{query}").get_data(as_text=True)

    assert _ids(page) == [ledger[name].id for name in expected]


def test_time_range_is_read_in_the_operators_zone(client, operator, ledger):
    db.session.execute(
        sa.text("UPDATE notification_deliveries SET created_at = '2026-01-10 00:30+00' WHERE id = :id"),
        {"id": ledger["bob_email"].id},
    )
    # 09:00-10:00 in Tokyo is 00:00-01:00 UTC.
    page = client.get("/console/deliveries?since=2026-01-10T09:00&until=2026-01-10T10:00").get_data(as_text=True)

    assert _ids(page) == [ledger["bob_email"].id]


def test_bad_filters_say_why_and_list_nothing(client, operator, ledger):
    response = client.get("/console/deliveries?status=lost&since=yesterday")

    assert response.status_code == 422
    text = response.get_data(as_text=True)
    assert "The status must be one of" in text and "From is not a date and time." in text and _ids(text) == []


def test_keyset_pages_never_repeat_or_skip(client, operator, ledger):
    extra = [NotificationFactory(user_id=UserFactory().id, type="comment").id for _ in range(56)]
    db.session.execute(
        sa.text(
            "INSERT INTO notification_deliveries (notification_id, user_id, channel) "
            "SELECT id, user_id, 'push' FROM notifications WHERE id = ANY(CAST(:ids AS bigint[]))"
        ),
        {"ids": extra},
    )
    first = client.get("/console/deliveries").get_data(as_text=True)
    older = one(first, ".load-more a")["href"]
    assert re.search(r"cursor=\d+", older)
    second = client.get(older).get_data(as_text=True)

    seen = _ids(first) + _ids(second)
    assert len(_ids(first)) == 50 and len(seen) == len(set(seen)) == 59
    assert seen == sorted(seen, reverse=True) and "That is all." in second


def test_one_delivery_shows_its_timeline_and_escaped_content(client, operator, ledger):
    response = client.get(f"/console/deliveries/{ledger['ada_email'].id}")
    page = response.get_data(as_text=True)

    # Each try in order: its outcome, how long it took (the head's last part), its error.
    timeline = []
    for item in parse(page).select("#attempts > li"):
        took = texts(item, ".ops-timeline__head")[0].split(" · ")[-1]
        timeline.append((texts(item, ".tag"), took, texts(item, ".ops-timeline__error")))
    assert timeline == [(["transient"], "5,003 ms", ["timeout: timed out"]), (["sent"], "42 ms", [])]
    assert "<script>alert(1)</script>" not in page  # only ever as text...
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    frame = one(page, "iframe")  # ...or in a frame with scripts off
    assert attrs(page, "iframe", "sandbox") == [""] and frame["srcdoc"].startswith("<script>alert(1)</script>")
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


def test_an_unsent_delivery_shows_the_notification_and_unknown_ids_404(client, operator, ledger):
    page = client.get(f"/console/deliveries/{ledger['ada_push'].id}").get_data(as_text=True)

    assert definitions(page, 'section[aria-labelledby="state-title"] dl')["Skipped because"] == "no_push_subscription"
    assert "Nothing rendered yet" in page
    assert client.get("/console/deliveries/987654321").status_code == 404
