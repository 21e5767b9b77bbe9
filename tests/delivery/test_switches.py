"""Kill switches: a paused channel or provider holds its rows untried; resuming sends them within one sweep."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.delivery import switches
from app.delivery.policy import UNTIL_RESUMED
from app.extensions import db
from app.models import AuditEntry
from app.providers import register
from app.providers.fake import FakeProvider
from app.refusal import Refused
from app.sweeper import sweep_once
from app.unitofwork import commit
from jobs.delivery import deliver_batch
from tests.factories import UserFactory
from tests.support.delivery import reload

pytestmark = pytest.mark.committed  # the engine records on its own autocommit connection

SPARE = FakeProvider()
SPARE.name = "fake_spare"
register("fake_spare")(lambda config: SPARE)


@pytest.fixture
def operator():
    return UserFactory(role="operator", email="olivia@example.com")


def audit_actions() -> list[tuple[str, str]]:
    db.session.rollback()
    return [(e.action, e.target_id) for e in db.session.scalars(sa.select(AuditEntry).order_by(AuditEntry.id))]


def test_a_paused_channel_holds_its_rows_untried_and_the_audit_says_why(app, fake_provider, make_delivery, operator):
    deliveries = [make_delivery() for _ in range(3)]
    assert switches.pause(operator, "email", "", "  SMTP relay  migration ", app.config) is True
    commit()

    counts = deliver_batch("email", [d.id for d in deliveries])

    assert counts == {"claimed": 3, "paused": 3}
    assert fake_provider.calls == 0
    for delivery in deliveries:
        row = reload(delivery)
        assert (row.status, row.attempts, row.skip_reason, row.locked_until) == ("pending", 0, None, None)
        assert row.next_attempt_at == UNTIL_RESUMED and row.held_since is not None
    assert audit_actions() == [("channel.pause", "email")]
    [thrown] = switches.read().switches
    assert (thrown.channel, thrown.provider, thrown.reason, thrown.paused_by) == (
        "email", "", "SMTP relay migration", operator.email)  # fmt: skip


def test_resuming_sends_the_waiting_rows_within_one_sweep(app, fake_provider, make_delivery):
    deliveries = [make_delivery() for _ in range(3)]
    switches.pause(None, "email", "", "incident 42", app.config)
    commit()
    deliver_batch("email", [d.id for d in deliveries])
    assert fake_provider.calls == 0

    assert sweep_once()["resumed"] == 0  # still paused: nothing released
    assert switches.resume(None, "email", "", app.config, "fixed") is True
    commit()
    passed = sweep_once()

    assert passed["resumed"] == 3 and passed["due"] == 3  # made due and enqueued in the same pass
    assert deliver_batch("email", [d.id for d in deliveries]) == {"claimed": 3, "sent": 3}
    assert sorted(m.delivery_id for m in fake_provider.sent) == sorted(d.id for d in deliveries)
    assert [a for a, _ in audit_actions()] == ["channel.pause", "channel.resume"]
    assert switches.resume(None, "email", "", app.config) is False  # not paused: nothing to do, nothing audited
    assert len(audit_actions()) == 2


def test_a_paused_provider_fails_over_to_the_next(app, fake_provider, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "EMAIL_PROVIDER", "fake,fake_spare")
    SPARE.reset()
    deliveries = [make_delivery() for _ in range(2)]
    switches.pause(None, "email", "fake", "the vendor's outage", app.config)
    commit()

    assert deliver_batch("email", [d.id for d in deliveries]) == {"claimed": 2, "sent": 2}

    assert fake_provider.calls == 0 and len(SPARE.sent) == 2
    assert {reload(d).provider for d in deliveries} == {"fake_spare"}


def test_every_provider_paused_holds_the_channel(app, fake_provider, make_delivery, monkeypatch):
    monkeypatch.setitem(app.config, "EMAIL_PROVIDER", "fake,fake_spare")
    SPARE.reset()
    delivery = make_delivery()
    switches.pause(None, "email", "fake", "outage", app.config)
    switches.pause(None, "email", "fake_spare", "outage too", app.config)
    commit()

    assert deliver_batch("email", [delivery.id]) == {"claimed": 1, "paused": 1}
    assert reload(delivery).next_attempt_at == UNTIL_RESUMED
    assert switches.open_channels(app.config) == ["push", "sms", "chat", "webhook"]

    switches.resume(None, "email", "fake_spare", app.config)
    commit()
    assert sweep_once()["resumed"] == 1  # one provider is enough for the channel to go again
    assert deliver_batch("email", [delivery.id]) == {"claimed": 1, "sent": 1}
    assert SPARE.sent[0].delivery_id == delivery.id


def test_rows_held_longer_than_the_max_age_expire_into_the_dlq(app, fake_provider, make_delivery):
    delivery = make_delivery()
    switches.pause(None, "email", "", "long outage", app.config)
    commit()
    deliver_batch("email", [delivery.id])
    db.session.execute(
        sa.text("UPDATE notification_deliveries SET held_since = now() - make_interval(secs => :age) WHERE id = :id"),
        {"age": app.config["DELIVERY_MAX_AGE"] + 60, "id": delivery.id},
    )
    commit()

    assert sweep_once()["expired"] == 1

    row = reload(delivery)
    assert (row.status, row.error_kind, row.attempts) == ("failed", "expired", 0)


def test_a_bad_switch_is_refused_and_changes_nothing(app):
    cases = [("fax", "", "why"), ("email", "carrier-pigeon", "why"), ("email", "", "   "), ("email", "", "x" * 501)]
    for channel, provider, reason in cases:
        with pytest.raises(Refused):
            switches.pause(None, channel, provider, reason, app.config)
    commit()
    assert switches.read().switches == () and audit_actions() == []


def test_the_command_line_pauses_lists_and_resumes(app):
    runner = app.test_cli_runner()

    paused = runner.invoke(args=["channels", "pause", "email", "--reason", "maintenance window"])
    assert paused.exit_code == 0, paused.output
    listed = runner.invoke(args=["channels", "list"])
    assert "email paused since" in listed.output and "maintenance window" in listed.output
    missing = runner.invoke(args=["channels", "pause", "email"])
    assert missing.exit_code != 0 and "--reason" in missing.output
    resumed = runner.invoke(args=["channels", "resume", "email"])
    assert resumed.exit_code == 0 and "resumed" in resumed.output
    unknown = runner.invoke(args=["channels", "pause", "fax", "--reason", "x"])
    assert unknown.exit_code != 0 and "fax" in unknown.output
    assert [a for a, _ in audit_actions()] == ["channel.pause", "channel.resume"]


def test_digests_and_webhooks_wait_on_their_channels_switch(app, fake_provider):
    from app.delivery import engine
    from app.delivery.channels import channel_for
    from app.digests.source import DIGESTS

    user = UserFactory()
    db.session.execute(
        sa.text("INSERT INTO digest_runs (user_id, kind, period_start, ledger_id) VALUES (:u, 'hourly', now(), 1)"),
        {"u": user.id},
    )
    commit()
    run_id = db.session.execute(sa.text("SELECT id FROM digest_runs")).scalar_one()
    switches.pause(None, "email", "", "digest freeze", app.config)
    commit()

    assert engine.deliver(DIGESTS, channel_for("email"), [run_id], app.config) == {"claimed": 1, "paused": 1}
    db.session.rollback()
    run = db.session.execute(sa.text("SELECT status, next_attempt_at, held_since FROM digest_runs")).one()
    assert run.status == "pending" and run.next_attempt_at == UNTIL_RESUMED and run.held_since is not None

    switches.resume(None, "email", "", app.config)
    commit()
    assert sweep_once()["resumed"] == 1
    db.session.rollback()
    due = db.session.execute(sa.text("SELECT next_attempt_at FROM digest_runs")).scalar_one()
    assert due < datetime.now(UTC) + timedelta(minutes=5)
