"""The delivery log: filters, keyset pages, one delivery's attempt timeline and rendered content."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import DeliveryAttempt
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory


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
                provider="smtp",
                duration_ms=5003,
                outcome="transient",
                error="timeout: timed out",
            ),
            DeliveryAttempt(delivery_id=rows["ada_email"].id, provider="smtp", duration_ms=42, outcome="sent"),
        ]
    )
    db.session.flush()
    return rows


def _ids(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr id="delivery-(\d+)"', page)]


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
            "INSERT INTO notification_deliveries (notification_id, channel) "
            "SELECT unnest(CAST(:ids AS bigint[])), 'push'"
        ),
        {"ids": extra},
    )
    first = client.get("/console/deliveries").get_data(as_text=True)
    cursor = re.search(r"cursor=(\d+)", first).group(1)
    second = client.get(f"/console/deliveries?cursor={cursor}").get_data(as_text=True)

    seen = _ids(first) + _ids(second)
    assert len(_ids(first)) == 50 and len(seen) == len(set(seen)) == 59
    assert seen == sorted(seen, reverse=True) and "That is all." in second


def test_one_delivery_shows_its_timeline_and_escaped_content(client, operator, ledger):
    response = client.get(f"/console/deliveries/{ledger['ada_email'].id}")
    page = response.get_data(as_text=True)

    timeline = page.split('id="attempts"')[1].split("</ol>")[0]
    assert timeline.index("transient") < timeline.index("sent") and "timeout: timed out" in timeline
    assert "5,003 ms" in timeline and "42 ms" in timeline
    assert "<script>alert(1)</script>" not in page  # only ever as text...
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert re.search(r'<iframe[^>]* sandbox srcdoc="&lt;script&gt;', page)  # ...or in a sandboxed frame
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


def test_an_unsent_delivery_shows_the_notification_and_unknown_ids_404(client, operator, ledger):
    page = client.get(f"/console/deliveries/{ledger['ada_push'].id}").get_data(as_text=True)

    assert "Skipped because</dt><dd>no_push_subscription" in page and "Nothing rendered yet" in page
    assert client.get("/console/deliveries/987654321").status_code == 404
