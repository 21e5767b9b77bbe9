"""The console's delivery log shows the events an aggregated notification holds (operators only)."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.notify.service import notify
from tests.console.conftest import operator  # noqa: F401 (fixture)
from tests.factories import NotificationTypeFactory, UserFactory


def aggregated_delivery_id() -> int:
    NotificationTypeFactory(type="like", default_email=True, aggregation_window=60)
    author = UserFactory()
    for n, name in enumerate(["Alice", "Bob"]):
        notify(
            [author.external_id],
            type_="like",
            title="liked your post",
            body="",
            dedupe_key=f"like:{n}",
            group_key="post:1",
            actor={"id": f"id-{name}", "name": name},
        )
    return db.session.execute(sa.text("SELECT id FROM notification_deliveries")).scalar_one()


def test_the_delivery_page_lists_the_events(client, operator):  # noqa: F811
    page = client.get(f"/console/deliveries/{aggregated_delivery_id()}").get_data(as_text=True)
    assert "Events in this aggregated notification (2)" in page
    assert page.index("Alice") < page.index("Bob") and "like:0" in page and "<code>id-Bob</code>" in page


def test_a_plain_delivery_has_no_events_section(client, operator):  # noqa: F811
    NotificationTypeFactory(type="comment", default_email=True)
    notify([UserFactory().external_id], type_="comment", title="t", body="", dedupe_key="c")
    delivery_id = db.session.execute(sa.text("SELECT id FROM notification_deliveries")).scalar_one()
    assert "aggregated notification" not in client.get(f"/console/deliveries/{delivery_id}").get_data(as_text=True)


def test_members_cannot_see_it(client, login_as):
    delivery_id = aggregated_delivery_id()
    login_as(UserFactory(role="member"))
    response = client.get(f"/console/deliveries/{delivery_id}")
    assert response.status_code in (302, 403, 404) and "Alice" not in response.get_data(as_text=True)
