"""The worker's re-check resolves a tenant's defaults as the ingest does: an e-mail the tenant turned on is sent."""

from __future__ import annotations

import pytest

from app.notify.service import notify
from app.tenants import service
from app.unitofwork import commit
from jobs.delivery import deliver_batch
from tests.factories import NotificationTypeFactory, UserFactory

pytestmark = pytest.mark.committed  # the engine records each send on its own connection


def test_an_email_on_by_the_tenants_default_is_sent(app, smtp_sink):
    NotificationTypeFactory(type="comment", default_email=False)
    member = UserFactory(email="m@example.com")
    acme, _ = service.put_tenant(None, "acme", {"name": "Acme"})
    service.set_member_tenants(None, member.id, ["acme"])
    service.set_preferences(None, acme, [("comment", "email", True)])
    result = notify([member.external_id], type_="comment", title="T", body="B", dedupe_key="k", tenant_id=acme.id)
    commit()

    assert deliver_batch("email", result.pending["email"]) == {"claimed": 1, "sent": 1}
    assert [m.rcpt_tos for m in smtp_sink.messages] == [["m@example.com"]]


def test_the_tenant_turning_it_off_before_the_send_skips_it(app, smtp_sink):
    NotificationTypeFactory(type="comment", default_email=True)
    member = UserFactory(email="m@example.com")
    acme, _ = service.put_tenant(None, "acme", {"name": "Acme"})
    service.set_member_tenants(None, member.id, ["acme"])
    result = notify([member.external_id], type_="comment", title="T", body="B", dedupe_key="k", tenant_id=acme.id)
    service.set_preferences(None, acme, [("comment", "email", False)])
    commit()

    counts = deliver_batch("email", result.pending["email"])

    assert counts["claimed"] == 1 and counts.get("sent", 0) == 0 and not smtp_sink.messages
