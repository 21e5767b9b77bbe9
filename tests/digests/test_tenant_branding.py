"""A digest is branded like its e-mails (issue 32, item 5): all its items one tenant's → that tenant's logo, colour,
sender name and reply-to; items of several tenants, or of a tenant and none → the default look; always escaped."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from app.digests.sweep import open_due
from app.extensions import db
from app.tenants import service as tenants
from jobs.digest import send_digests
from tests.digests.test_digests import NOW, run_ids
from tests.factories import UserFactory

pytestmark = pytest.mark.committed

ACME = {"name": "Acme Inc.", "logo_url": "https://cdn.acme.example/logo.png", "primary_color": "#1A73E8",
        "email_sender_name": "Acme via Hato", "reply_to": "support@acme.example"}  # fmt: skip
GLOBEX = {"name": "Globex", "logo_url": "https://cdn.globex.example/g.png", "primary_color": "#00aa00",
          "email_sender_name": "Globex alerts", "reply_to": "help@globex.example"}  # fmt: skip


def _items(user, hourly_type, waiting, tenant_ids):
    for i, tenant_id in enumerate(tenant_ids):
        delivery = waiting(user, hourly_type, NOW - timedelta(minutes=10), title=f"Item {i}")
        db.session.execute(sa.text("UPDATE notifications SET tenant_id = :t WHERE id = :n"),
                           {"t": tenant_id, "n": delivery.notification_id})  # fmt: skip


def _digest(app, fake_provider):
    open_due(NOW, app.config)
    assert send_digests(run_ids())["sent"] == 1
    [message] = fake_provider.sent
    return message


def test_a_digest_of_one_tenants_items_carries_its_branding(app, fake_provider, hourly_type, waiting):
    acme, _ = tenants.put_tenant(None, "acme", ACME)
    _items(UserFactory(), hourly_type, waiting, [acme.id, acme.id])

    message = _digest(app, fake_provider)

    assert message.from_name == "Acme via Hato" and message.headers["Reply-To"] == "support@acme.example"
    assert '<img src="https://cdn.acme.example/logo.png" alt="Acme Inc." height="40">' in message.html
    assert "background: #1a73e8 !important" in message.html and "border-top: 4px solid #1a73e8" in message.html
    assert "List-Unsubscribe" in message.headers


@pytest.mark.parametrize("mix", ["two_tenants", "tenant_and_none"])
def test_a_digest_mixing_tenants_keeps_the_default_look(app, fake_provider, hourly_type, waiting, mix):
    acme, _ = tenants.put_tenant(None, "acme", ACME)
    globex, _ = tenants.put_tenant(None, "globex", GLOBEX)
    _items(UserFactory(), hourly_type, waiting, [acme.id, globex.id if mix == "two_tenants" else None])

    message = _digest(app, fake_provider)

    assert message.from_name is None and "Reply-To" not in message.headers
    assert 'class="brand"' not in message.html and "!important" not in message.html
    assert "cdn.acme.example" not in message.html and "cdn.globex.example" not in message.html


def test_a_digest_without_tenants_is_unchanged(app, fake_provider, hourly_type, waiting):
    _items(UserFactory(), hourly_type, waiting, [None])

    message = _digest(app, fake_provider)

    assert message.from_name is None and "Reply-To" not in message.headers and 'class="brand"' not in message.html


def test_the_branding_left_is_the_one_of_the_items_still_unread(app, fake_provider, hourly_type, waiting):
    acme, _ = tenants.put_tenant(None, "acme", ACME)
    user = UserFactory()
    _items(user, hourly_type, waiting, [acme.id])
    read = waiting(user, hourly_type, NOW - timedelta(minutes=10), title="Read", read=True)  # no tenant, read
    assert read.id

    message = _digest(app, fake_provider)

    assert message.from_name == "Acme via Hato"


def test_a_digests_branding_is_escaped_and_its_logo_checked_even_if_stored_around_the_rules(
    app, fake_provider, hourly_type, waiting
):
    stored = sa.text(
        "INSERT INTO tenants (key, name, logo_url, primary_color, email_sender_name) VALUES ('x', "
        "'\"><script>x</script>', 'https://cdn.example/\"onerror=\"alert(1)', 'red;}</style><script>y</script>', "
        "'Evil\r\nBcc: a@b.example') RETURNING id"
    )
    tenant_id = db.session.execute(stored).scalar_one()
    _items(UserFactory(), hourly_type, waiting, [tenant_id])

    message = _digest(app, fake_provider)

    assert "<script>" not in message.html and '"onerror=' not in message.html and "red;}" not in message.html
    assert "Bcc" not in "".join(message.headers)


def test_a_tenants_logo_from_a_local_host_is_not_shown(app, fake_provider, hourly_type, waiting):
    stored = sa.text(
        "INSERT INTO tenants (key, name, logo_url) VALUES ('x', 'X', 'https://127.0.0.1/logo.png') RETURNING id"
    )
    _items(UserFactory(), hourly_type, waiting, [db.session.execute(stored).scalar_one()])

    assert "127.0.0.1/logo.png" not in _digest(app, fake_provider).html
