"""A tenant's notification e-mail carries its branding (issue 32, item 5, e-mail part): the From header's display
name is the tenant's sender name (the address stays MAIL_FROM's), Reply-To its reply-to, and the HTML its logo and
colour, escaped; other e-mails are unchanged."""

from __future__ import annotations

from email.utils import parseaddr

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.notify.service import notify
from app.tenants import service
from app.unitofwork import commit
from jobs.delivery import deliver_batch
from tests.factories import NotificationTypeFactory, UserFactory

pytestmark = pytest.mark.committed  # the engine records each send on its own connection

ACME = {"name": "Acme Inc.", "logo_url": "https://cdn.acme.example/logo.png", "primary_color": "#1A73E8",
        "email_sender_name": "Acme via Hato", "reply_to": "support@acme.example"}  # fmt: skip


def _send(tenant_fields: dict | None):
    NotificationTypeFactory(type="comment", default_email=True)
    member = UserFactory(email="m@example.com")
    tenant_id = None
    if tenant_fields is not None:
        tenant, _ = service.put_tenant(None, "acme", tenant_fields)
        service.set_member_tenants(None, member.id, ["acme"])
        tenant_id = tenant.id
    result = notify([member.external_id], type_="comment", title="T", body="B", dedupe_key="k", tenant_id=tenant_id)
    commit()
    assert deliver_batch("email", result.pending["email"]) == {"claimed": 1, "sent": 1}


def test_a_tenants_email_carries_its_sender_name_reply_to_logo_and_colour(app, smtp_sink):
    _send(ACME)

    [received] = smtp_sink.messages
    msg = received.message
    [sender] = msg["From"].addresses
    assert sender.display_name == "Acme via Hato"
    assert sender.addr_spec == parseaddr(app.config["MAIL_FROM"])[1]
    assert msg["Reply-To"] == "support@acme.example"
    html = msg.get_body(("html",)).get_content()
    assert '<img src="https://cdn.acme.example/logo.png" alt="Acme Inc." height="40">' in html
    assert "background: #1a73e8 !important" in html


def test_an_email_without_a_tenant_is_unchanged(app, smtp_sink):
    _send(None)

    [received] = smtp_sink.messages
    assert (
        received.message["Reply-To"] is None
        and 'class="brand"' not in received.message.get_body(("html",)).get_content()
    )


def test_branding_is_escaped_even_if_stored_around_the_rules(app, smtp_sink):
    NotificationTypeFactory(type="comment", default_email=True)
    member = UserFactory(email="m@example.com")
    stored = sa.text(
        "INSERT INTO tenants (key, name, logo_url, primary_color) VALUES ('x', '\"><script>x</script>', "
        "'https://cdn.example/\"onerror=\"alert(1)', 'red;}</style><script>y</script>') RETURNING id"
    )
    tenant_id = db.session.execute(stored).scalar_one()
    db.session.execute(sa.text("INSERT INTO tenant_members (user_id, tenant_id) VALUES (:u, :t)"),
                       {"u": member.id, "t": tenant_id})  # fmt: skip
    result = notify([member.external_id], type_="comment", title="T", body="B", dedupe_key="k", tenant_id=tenant_id)
    commit()
    deliver_batch("email", result.pending["email"])

    html = smtp_sink.messages[0].message.get_body(("html",)).get_content()
    assert "<script>" not in html and '"onerror=' not in html and "red;}" not in html
