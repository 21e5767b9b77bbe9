"""The member's own inbox (issue 32, item 7): a member of several tenants narrows the list to one of them."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.tenants import service
from tests.factories import NotificationFactory, NotificationTypeFactory, UserFactory


def _world(login_as, tenants=("acme", "globex")):
    NotificationTypeFactory(type="comment")
    member = login_as(UserFactory())
    for key in tenants:
        tenant, _ = service.put_tenant(None, key, {"name": key.title() + " <b>Org</b>"})
        row = NotificationFactory(user_id=member.id, type="comment", title=f"For {key}")
        db.session.execute(
            sa.text("UPDATE notifications SET tenant_id = :t WHERE id = :id"), {"t": tenant.id, "id": row.id}
        )
    service.set_member_tenants(None, member.id, list(tenants))
    NotificationFactory(user_id=member.id, type="comment", title="For nobody")
    return member


def test_a_member_of_two_tenants_gets_the_filter(client, login_as):
    _world(login_as)

    everything = client.get("/inbox").get_data(as_text=True)
    assert 'id="inbox-tenants"' in everything and "Acme &lt;b&gt;Org&lt;/b&gt;" in everything
    assert all(f"For {k}" in everything for k in ("acme", "globex", "nobody"))

    narrowed = client.get("/inbox?tenant=acme").get_data(as_text=True)
    assert "For acme" in narrowed and "For globex" not in narrowed and "For nobody" not in narrowed
    assert 'href="/inbox?tenant=acme&amp;filter=unread"' in narrowed or "filter=unread&amp;tenant=acme" in narrowed


def test_a_member_of_one_tenant_has_no_filter(client, login_as):
    _world(login_as, tenants=("acme",))
    assert 'id="inbox-tenants"' not in client.get("/inbox").get_data(as_text=True)
    assert client.get("/inbox?tenant=acme").status_code == 400


def test_a_tenant_the_member_is_not_in_is_refused(client, login_as):
    _world(login_as)
    service.put_tenant(None, "initech", {"name": "Initech"})
    assert client.get("/inbox?tenant=initech").status_code == 400


def test_read_all_narrowed_reads_only_that_tenants_rows(client, csrf, login_as):
    _world(login_as)

    response = client.post("/inbox/read-all", headers=csrf(), data={"filter": "all", "tenant": "globex"})

    assert response.status_code == 303
    unread = db.session.execute(sa.text("SELECT title FROM notifications WHERE read_at IS NULL ORDER BY title"))
    assert list(unread.scalars()) == ["For acme", "For nobody"]
