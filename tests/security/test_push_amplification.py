"""Issue 14 item 5, push amplification: one member multiplies what every notification costs, or takes an endpoint.

Each subscription is one more POST per notification for the workers. The attacker subscribes endlessly
(one account, many endpoints), hammers the subscribe call, or posts a victim's endpoint (seen in a log,
a shared browser) under their own account so that the victim's device gets the attacker's messages and
the victim's stop.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from flask import g

from app.extensions import db
from app.models import PushSubscription
from tests.factories import UserFactory
from tests.support.push import PushService

SERVICE = PushService(origin="https://localhost")  # on the test allow-list; never contacted here


def switch_to(login_as, user) -> None:
    g.pop("_login_user", None)  # Flask-Login caches the user on g, which outlives a test request
    login_as(user)


def endpoints_of(user) -> list[str]:
    db.session.expire_all()
    query = (
        sa.select(PushSubscription.endpoint).where(PushSubscription.user_id == user.id).order_by(PushSubscription.id)
    )
    return list(db.session.scalars(query))


@pytest.fixture
def subscribe(client, csrf):
    return lambda data: client.post("/push/subscriptions", json=data, headers=csrf())


def test_the_eleventh_subscription_drops_the_oldest(login_as, subscribe):
    user = login_as(UserFactory())
    made = [SERVICE.subscribe() for _ in range(11)]
    for data in made:
        assert subscribe(data).status_code == 201
    kept = endpoints_of(user)
    assert len(kept) == 10
    assert made[0]["endpoint"] not in kept
    assert kept == [data["endpoint"] for data in made[1:]]


def test_renewing_an_existing_subscription_does_not_count_twice(login_as, subscribe):
    user = login_as(UserFactory())
    made = [SERVICE.subscribe() for _ in range(10)]
    for data in made:
        subscribe(data)
    for _ in range(3):  # the browser refreshes its keys: same endpoint, no new row, nothing dropped
        assert subscribe({**SERVICE.subscribe(), "endpoint": made[0]["endpoint"]}).status_code == 201
    assert sorted(endpoints_of(user)) == sorted(data["endpoint"] for data in made)


def test_a_lower_cap_is_honoured(app, login_as, subscribe, monkeypatch):
    monkeypatch.setitem(app.config, "PUSH_MAX_SUBSCRIPTIONS_PER_USER", 2)
    user = login_as(UserFactory())
    made = [SERVICE.subscribe() for _ in range(4)]
    for data in made:
        subscribe(data)
    assert endpoints_of(user) == [made[2]["endpoint"], made[3]["endpoint"]]


def test_a_burst_of_subscribe_calls_is_rate_limited_per_user(app, login_as, subscribe):
    attacker = login_as(UserFactory())
    statuses = [subscribe(SERVICE.subscribe()).status_code for _ in range(25)]
    assert statuses[:20] == [201] * 20
    assert set(statuses[20:]) == {429}
    assert len(endpoints_of(attacker)) == 10
    # Once the budget is spent every call is refused before it is even read, malformed or not.
    refused = subscribe({"endpoint": "https://localhost/x"})
    assert refused.status_code == 429 and refused.headers.get("Retry-After")
    # Another member is not held back by the attacker's burst.
    switch_to(login_as, UserFactory())
    assert subscribe(SERVICE.subscribe()).status_code == 201


def test_another_users_endpoint_gets_409_and_stays_with_its_owner(login_as, subscribe):
    victim, attacker = UserFactory(), UserFactory()
    login_as(victim)
    data = SERVICE.subscribe()
    assert subscribe(data).status_code == 201
    switch_to(login_as, attacker)
    stolen = {**SERVICE.subscribe(), "endpoint": data["endpoint"]}  # the attacker's own keys on the victim's endpoint
    response = subscribe(stolen)
    assert response.status_code == 409 and response.mimetype == "application/problem+json"
    assert endpoints_of(attacker) == []
    assert endpoints_of(victim) == [data["endpoint"]]
    row = db.session.scalars(sa.select(PushSubscription).where(PushSubscription.endpoint == data["endpoint"])).one()
    assert (row.p256dh, row.auth) == (data["keys"]["p256dh"], data["keys"]["auth"])  # the victim's keys are kept


def test_an_invalidated_endpoint_of_another_user_is_not_taken_either(login_as, subscribe):
    victim, attacker = UserFactory(), UserFactory()
    login_as(victim)
    data = SERVICE.subscribe()
    subscribe(data)
    db.session.execute(sa.update(PushSubscription).values(invalidated_at=sa.func.now()))
    switch_to(login_as, attacker)
    assert subscribe(data).status_code == 409
    assert endpoints_of(victim) == [data["endpoint"]]
