"""Default preferences per tenant (issue 32, item 6): type default → tenant default → the member's own choice.

Resolved inside the ingest's set-based SQL (no Python per row); a mandatory type stays on whatever the tenant or
the member say; a notification without a tenant ignores every tenant's defaults; the worker's re-check agrees.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.notify.service import OutsideTenant, notify
from app.tenants import service
from tests.factories import NotificationTypeFactory, PreferenceFactory, UserFactory


def send(user, tenant=None, type_="comment", key="k1"):
    return notify([user.external_id], type_=type_, title="T", body="B", dedupe_key=key,
                  tenant_id=tenant.id if tenant else None)  # fmt: skip


def channels_of(user) -> dict:
    """channel → status of the user's deliveries, with 'in_app' → whether the row shows in the inbox."""
    rows = db.session.execute(
        sa.text("SELECT n.in_app, d.channel, d.status FROM notifications n LEFT JOIN notification_deliveries d "
                "ON d.notification_id = n.id AND d.user_id = n.user_id WHERE n.user_id = :u"), {"u": user.id},
    ).all()  # fmt: skip
    found = {row.channel: row.status for row in rows if row.channel}
    return {"in_app": rows[0].in_app, **found} if rows else {}


@pytest.fixture
def acme(make_tenant, member):
    return make_tenant("acme", member)


def test_the_tenant_default_turns_on_what_the_type_leaves_off(acme, member):
    NotificationTypeFactory(type="comment", default_email=False)
    service.set_preferences(None, acme, [("comment", "email", True)])

    send(member, acme)

    assert channels_of(member) == {"in_app": True, "email": "pending"}


def test_the_tenant_default_turns_off_what_the_type_has_on(acme, member):
    NotificationTypeFactory(type="comment", default_email=True)
    service.set_preferences(None, acme, [("comment", "email", False), ("comment", "in_app", False)])

    send(member, acme)

    assert channels_of(member) == {"in_app": False}  # written (born read, hidden), no e-mail


def test_the_members_own_choice_beats_the_tenants(acme, member):
    NotificationTypeFactory(type="comment", default_email=False)
    service.set_preferences(None, acme, [("comment", "email", False)])
    PreferenceFactory(user_id=member.id, type="comment", channel="email", enabled=True)

    send(member, acme)

    assert channels_of(member)["email"] == "pending"


def test_the_members_off_beats_the_tenants_on(acme, member):
    NotificationTypeFactory(type="comment", default_email=False)
    service.set_preferences(None, acme, [("comment", "email", True)])
    PreferenceFactory(user_id=member.id, type="comment", channel="email", enabled=False)

    send(member, acme)

    assert "email" not in channels_of(member)


def test_a_mandatory_type_stays_on_whatever_the_tenant_and_member_say(acme, member):
    NotificationTypeFactory(type="comment", default_email=True, mandatory=True)
    service.set_preferences(None, acme, [("comment", "email", False), ("comment", "in_app", False)])
    PreferenceFactory(user_id=member.id, type="comment", channel="email", enabled=False)

    send(member, acme)

    assert channels_of(member) == {"in_app": True, "email": "pending"}


def test_without_a_tenant_the_type_default_holds(acme, member):
    NotificationTypeFactory(type="comment", default_email=False)
    service.set_preferences(None, acme, [("comment", "email", True)])

    send(member)

    assert channels_of(member) == {"in_app": True}


def test_another_tenants_defaults_do_not_apply(make_tenant, member):
    NotificationTypeFactory(type="comment", default_email=False)
    acme, globex = make_tenant("acme", member), make_tenant("globex", member)
    service.set_preferences(None, globex, [("comment", "email", True)])

    send(member, acme)

    assert channels_of(member) == {"in_app": True}


def test_recipients_are_resolved_together_each_by_their_own_choice(acme, member, make_tenant):
    NotificationTypeFactory(type="comment", default_email=False)
    other = UserFactory()
    make_tenant("acme", other)  # already there: adds the member
    service.set_preferences(None, acme, [("comment", "email", True)])
    PreferenceFactory(user_id=other.id, type="comment", channel="email", enabled=False)

    notify([member.external_id, other.external_id], type_="comment", title="T", body="B", dedupe_key="k",
           tenant_id=acme.id)  # fmt: skip

    assert channels_of(member)["email"] == "pending" and "email" not in channels_of(other)


def test_an_outsider_is_named_and_nothing_is_written(acme, member):
    NotificationTypeFactory(type="comment")
    outsider = UserFactory()

    with pytest.raises(OutsideTenant) as refused:
        notify([member.external_id, outsider.external_id], type_="comment", title="T", body="B", dedupe_key="k",
               tenant_id=acme.id)  # fmt: skip

    assert refused.value.outsiders == [outsider.external_id]
    assert db.session.execute(sa.text("SELECT count(*) FROM notifications")).scalar_one() == 0


def test_an_aggregated_thread_stays_within_its_tenant(make_tenant, member):
    NotificationTypeFactory(type="comment", aggregation_window=600)
    acme, globex = make_tenant("acme", member), make_tenant("globex", member)

    for n, tenant in enumerate((acme, globex, acme)):
        notify([member.external_id], type_="comment", title="T", body="B", dedupe_key=f"e{n}", group_key="post:1",
               tenant_id=tenant.id)  # fmt: skip

    rows = db.session.execute(
        sa.text("SELECT tenant_id, event_count FROM notifications WHERE user_id = :u ORDER BY tenant_id"),
        {"u": member.id},
    ).all()
    assert [tuple(r) for r in rows] == [(acme.id, 2), (globex.id, 1)]
