"""Console → Tenants (issue 32): the list, the editor, default preferences, delete; operators only, CSRF-checked,
audited; names and colours are escaped; the delivery log narrows to a tenant."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.tenants import queries, service
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory
from tests.support.html import texts

FORM = {
    "key": "acme",
    "name": "Acme Inc.",
    "logo_url": "https://cdn.acme.example/logo.png",
    "primary_color": "#1A73E8",
    "email_sender_name": "Acme via Hato",
    "reply_to": "support@acme.example",
}


def tenant_count() -> int:
    return db.session.execute(sa.text("SELECT count(*) FROM tenants")).scalar_one()


def test_create_then_edit_a_tenant(client, csrf, operator, audit_rows):
    response = client.post("/console/tenants/new", headers=csrf(), data=FORM)

    assert response.status_code == 302 and response.headers["Location"].endswith("/console/tenants/acme/edit")
    item = queries.tenant("acme")
    assert (item.name, item.primary_color, item.reply_to) == ("Acme Inc.", "#1a73e8", "support@acme.example")
    assert audit_rows("tenant.create")[0].actor_label == "olivia@example.com"

    edited = client.post("/console/tenants/acme/edit", headers=csrf(),
                         data={**FORM, "key": "renamed", "name": "Acme Corp", "logo_url": ""})  # fmt: skip
    assert edited.status_code == 302
    db.session.expire_all()
    item = queries.tenant("acme")
    assert (item.name, item.logo_url) == ("Acme Corp", None) and queries.tenant("renamed") is None
    (entry,) = audit_rows("tenant.update")
    assert entry.before["name"] == "Acme Inc." and entry.after["logo_url"] is None
    page = client.get("/console/tenants").get_data(as_text=True)
    assert "Acme Corp" in page and "#1a73e8" in page


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("logo_url", "http://cdn.acme.example/logo.png"),
        ("logo_url", "javascript:alert(1)"),
        ("logo_url", "https://192.168.1.10/logo.png"),
        ("primary_color", "blue"),
        ("email_sender_name", "Acme\nBcc: x@example.com"),
        ("reply_to", "nobody"),
        ("key", "has space"),
    ],
)
def test_a_field_that_breaks_its_rule_is_shown_and_nothing_is_saved(client, csrf, operator, audit_rows, field, value):
    response = client.post("/console/tenants/new", headers=csrf(), data={**FORM, field: value})

    assert response.status_code == 422
    html = response.get_data(as_text=True)
    assert f'id="{field}-error"' in html and 'aria-invalid="true"' in html
    assert tenant_count() == 0 and audit_rows() == []


def test_a_key_already_taken_is_refused(client, csrf, operator):
    service.put_tenant(None, "acme", {"name": "First"})
    response = client.post("/console/tenants/new", headers=csrf(), data=FORM)
    assert response.status_code == 422 and "already has this key" in response.get_data(as_text=True)
    assert queries.tenant("acme").name == "First"


def test_names_and_colours_are_escaped(client, operator):
    # Stored straight in the table (the rules would refuse the colour): the pages must still escape both.
    db.session.execute(sa.text(
        "INSERT INTO tenants (key, name, primary_color, email_sender_name) VALUES "
        "('x', '<script>alert(1)</script>', '\"><img src=x onerror=alert(1)>', '<b>bold</b>')"))  # fmt: skip
    for url in ("/console/tenants", "/console/tenants/x/edit", "/console/deliveries"):
        html = client.get(url).get_data(as_text=True)
        assert "<script>alert(1)" not in html and "<img src=x" not in html and "<b>bold" not in html, url
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, url


def test_the_default_preferences_grid_saves_and_shows_the_choices(client, csrf, operator, audit_rows):
    NotificationTypeFactory(type="comment", label="Comment")
    NotificationTypeFactory(type="security", label="Security", mandatory=True)
    tenant, _ = service.put_tenant(None, "acme", {"name": "Acme"})

    response = client.post("/console/tenants/acme/preferences", headers=csrf(),
                           data={"pref:comment:email": "on", "pref:comment:push": "off", "pref:comment:in_app": "",
                                 "pref:comment:fax": "on", "other": "x"})  # fmt: skip

    assert response.status_code == 302
    assert queries.preferences(tenant.id) == {("comment", "email"): True, ("comment", "push"): False}
    assert audit_rows("tenant.preferences")[0].after == {"comment": {"email": True, "push": False}}
    html = client.get("/console/tenants/acme/edit").get_data(as_text=True)
    assert '<option value="on" selected>' in html and '<option value="off" selected>' in html
    assert 'name="pref:security:email" aria-label="Security by E-mail" disabled' in html


def test_a_default_for_an_unknown_type_is_refused_and_nothing_changes(client, csrf, operator):
    NotificationTypeFactory(type="comment")
    tenant, _ = service.put_tenant(None, "acme", {"name": "Acme"})
    service.set_preferences(None, tenant, [("comment", "email", True)])

    response = client.post("/console/tenants/acme/preferences", headers=csrf(), data={"pref:nope:email": "on"})

    assert response.status_code == 302
    assert queries.preferences(tenant.id) == {("comment", "email"): True}
    assert "no notification type" in client.get("/console/tenants/acme/edit").get_data(as_text=True)


def test_an_operator_sets_the_tenants_limits_checked_and_audited(client, csrf, operator, audit_rows):
    service.put_tenant(None, "acme", {"name": "Acme"})
    url = "/console/tenants/acme/quota"
    refused = client.post(url, headers=csrf(), data={"burst": "3"}, follow_redirects=True)
    assert "A burst needs a rate" in refused.get_data(as_text=True) and not audit_rows("tenant.quota")

    done = client.post(url, headers=csrf(), data={"rate": "2.5", "daily": "500"}, follow_redirects=True)
    page = done.get_data(as_text=True)
    assert "Tenant acme now has these limits." in page
    assert texts(page, "#tenant-limits .console-quota li") == [
        "2.5 requests/s, bursts of 3", "500 notifications a day (UTC)"
    ]  # fmt: skip
    (entry,) = audit_rows("tenant.quota")
    assert entry.after == {"rate_per_second": 2.5, "rate_burst": None, "daily_quota": 500}
    db.session.expire_all()
    assert (queries.tenant("acme").rate_per_second, queries.tenant("acme").daily_quota) == (2.5, 500)


def test_delete_a_tenant(client, csrf, operator, audit_rows):
    service.put_tenant(None, "acme", {"name": "Acme"})
    response = client.post("/console/tenants/acme/delete", headers=csrf())
    assert response.status_code == 302 and tenant_count() == 0
    assert audit_rows("tenant.delete")[0].target_id == "acme"


@pytest.mark.parametrize(
    ("url", "data"),
    [
        ("/console/tenants/new", FORM),
        ("/console/tenants/acme/edit", {**FORM, "name": "Changed"}),
        ("/console/tenants/acme/preferences", {"pref:comment:email": "on"}),
        ("/console/tenants/acme/quota", {"daily": "5"}),
        ("/console/tenants/acme/delete", {}),
    ],
)
def test_without_the_csrf_token_nothing_changes(client, operator, url, data):
    NotificationTypeFactory(type="comment")
    tenant, _ = service.put_tenant(None, "acme", {"name": "Acme"})
    response = client.post(url, data={**data, "key": "other"} if url.endswith("new") else data)
    assert response.status_code == 400
    db.session.expire_all()
    assert queries.tenant("acme").name == "Acme" and queries.tenant("other") is None
    assert queries.preferences(tenant.id) == {} and queries.tenant("acme").daily_quota is None


def test_members_cannot_open_the_pages(client, member):
    service.put_tenant(None, "acme", {"name": "Acme"})
    for url in ("/console/tenants", "/console/tenants/new", "/console/tenants/acme/edit"):
        assert client.get(url).status_code == 403


def test_an_unknown_tenant_is_404(client, operator):
    assert client.get("/console/tenants/nope/edit").status_code == 404


def test_the_delivery_log_narrows_to_a_tenant(client, operator):
    NotificationTypeFactory(type="comment")
    acme, _ = service.put_tenant(None, "acme", {"name": "Acme"})
    user = UserFactory()
    ours = NotificationFactory(user_id=user.id, type="comment", title="Ours")
    theirs = NotificationFactory(user_id=user.id, type="comment", title="Theirs")
    db.session.execute(sa.text("UPDATE notifications SET tenant_id = :t WHERE id = :id"), {"t": acme.id, "id": ours.id})
    mine = DeliveryFactory(notification_id=ours.id, user_id=user.id)
    other = DeliveryFactory(notification_id=theirs.id, user_id=user.id)

    html = client.get("/console/deliveries?tenant=acme").get_data(as_text=True)

    assert f'/console/deliveries/{mine.id}"' in html and f'/console/deliveries/{other.id}"' not in html
    assert '<option value="acme" selected>' in html
    everything = client.get("/console/deliveries").get_data(as_text=True)
    assert f'/console/deliveries/{other.id}"' in everything
