"""DLQ replay and discard: one row or everything matching, in keyset batches, idempotent, audited."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app import keyspace
from app.delivery import dlq as ledger_service
from app.delivery.ledger_queries import DlqFilters
from app.extensions import db
from app.models import AuditEntry, BulkOperation, NotificationDelivery
from app.queueing import bulk_operation_job, get_queue
from app.refusal import Refused
from jobs import bulk
from tests.factories import DeliveryFactory, NotificationFactory, NotificationTypeFactory, UserFactory


@pytest.fixture
def operator():
    return UserFactory(role="operator")


@pytest.fixture
def promo():
    return NotificationTypeFactory(type="promo", label="Offers", default_email=True)


@pytest.fixture
def failed(promo):
    """Make a failed delivery (error kind, provider, type, channel overridable); return it."""

    def _failed(error_kind="refused", provider="smtp", type_=None, channel="email", status="failed", campaign=None):
        notification = NotificationFactory(user_id=UserFactory().id, type=type_ or promo.type, campaign_id=campaign)
        return DeliveryFactory(
            notification_id=notification.id,
            channel=channel,
            status=status,
            attempts=8,
            error_kind=error_kind if status == "failed" else None,
            provider=provider,
            last_error="connection refused",
        )

    return _failed


def _state(delivery) -> tuple:
    db.session.expire_all()
    row = db.session.get(NotificationDelivery, (delivery.id, delivery.user_id))
    return row.status, row.attempts, row.error_kind, row.skip_reason


def _actions() -> list[str]:
    return list(db.session.scalars(sa.select(AuditEntry.action).order_by(AuditEntry.id)))


def test_replay_one_resets_the_row_and_keeps_its_priority(failed, operator):
    otp = NotificationTypeFactory(type="otp", default_email=True, priority="high")
    interactive = failed(type_=otp.type)

    replayed = ledger_service.replay_one(operator, interactive.id)

    assert (replayed.queue, replayed.channel) == ("high", "email")
    assert _state(interactive) == ("pending", 0, None, None)
    assert (
        db.session.get(NotificationDelivery, (interactive.id, interactive.user_id)).last_error == "connection refused"
    )  # history stays
    with pytest.raises(Refused, match="not in the dead-letter queue"):
        ledger_service.replay_one(operator, interactive.id)
    assert _actions() == ["dlq.replay"]


def test_a_campaign_row_is_replayed_on_low(failed, operator, promo):
    from app.campaigns import service

    campaign = service.create_campaign(operator, name="c", type_=promo.type, title="t", body="b")
    db.session.flush()
    row = failed(campaign=campaign.id)

    assert ledger_service.replay_one(operator, row.id).queue == "low"


def test_discard_one_needs_a_reason_and_leaves_the_dlq_as_skipped(failed, operator):
    row = failed()

    with pytest.raises(Refused, match="Say why"):
        ledger_service.discard_one(operator, row.id, "   ")
    assert _state(row)[0] == "failed" and _actions() == []

    ledger_service.discard_one(operator, row.id, "  address   retired ")

    assert _state(row) == ("skipped", 8, "refused", "discarded: address retired")
    entry = db.session.scalars(sa.select(AuditEntry)).one()
    assert (entry.action, entry.target_id, entry.after["skip_reason"]) == (
        "dlq.discard",
        str(row.id),
        "discarded: address retired",
    )


def test_bulk_replay_touches_only_matching_failed_rows_in_batches(failed, operator, app, monkeypatch):
    monkeypatch.setitem(app.config, "BULK_BATCH_SIZE", 2)
    matching = [failed() for _ in range(5)]
    other_kind = failed(error_kind="rejected")
    other_provider = failed(provider="fake")
    already_sent = failed(status="sent")
    push = failed(channel="push")
    operation = ledger_service.create_bulk(operator, "replay", DlqFilters(error_kind="refused", provider="smtp"))
    db.session.commit()
    assert (operation.total, operation.status) == (6, "queued")
    late = failed()  # failed after the operator asked: not part of this operation
    db.session.commit()

    assert bulk.run_bulk_operation(operation.id) == {"changed": 6, "enqueued": 6}  # each replayed row queued

    for row in [*matching, push]:
        assert _state(row)[:2] == ("pending", 0)
    assert _state(other_kind)[0] == _state(other_provider)[0] == _state(late)[0] == "failed"
    assert _state(already_sent)[0] == "sent"
    db.session.expire_all()
    operation = db.session.get(BulkOperation, operation.id)
    assert (operation.status, operation.done, operation.total) == ("done", 6, 6)
    assert operation.finished_at is not None and operation.cursor_id == max(r.id for r in [*matching, push])
    queued = {tuple(job.args[1]) for job in (get_queue("low").fetch_job(i) for i in get_queue("low").get_job_ids())}
    assert sorted(i for ids in queued for i in ids) == sorted(r.id for r in [*matching, push])
    assert get_queue("high").count == 0
    # On default only the operation's own job, which followed create_bulk's commit (this test ran it by hand).
    assert get_queue("default").get_job_ids() == [bulk_operation_job(operation.id).job_id]
    assert _actions() == ["dlq.replay_all", "dlq.replay_all.done"]


def test_bulk_replay_is_idempotent(failed, operator):
    rows = [failed() for _ in range(3)]
    operation = ledger_service.create_bulk(operator, "replay", DlqFilters())
    db.session.commit()
    bulk.run_bulk_operation(operation.id)
    # The rows fail again before the (duplicate) job runs a second time: it must not replay them.
    db.session.execute(
        sa.text("UPDATE notification_deliveries SET status = 'failed' WHERE id = ANY(:ids)"),
        {"ids": [r.id for r in rows]},
    )
    db.session.execute(sa.text("UPDATE bulk_operations SET status = 'running' WHERE id = :id"), {"id": operation.id})
    db.session.commit()
    enqueued = get_queue("low").count

    assert bulk.run_bulk_operation(operation.id) == {"changed": 0, "enqueued": 0}
    assert get_queue("low").count == enqueued and all(_state(r)[0] == "failed" for r in rows)


def test_bulk_discard_needs_a_reason_and_records_it(failed, operator):
    rows = [failed() for _ in range(2)]
    with pytest.raises(Refused, match="Say why"):
        ledger_service.create_bulk(operator, "discard", DlqFilters())
    operation = ledger_service.create_bulk(operator, "discard", DlqFilters(), reason="mailbox migration")
    db.session.commit()

    assert bulk.run_bulk_operation(operation.id) == {"changed": 2, "enqueued": 0}  # discarded: nothing to send
    assert {_state(r)[3] for r in rows} == {"discarded: mailbox migration"}
    assert get_queue("low").count == 0  # nothing to send


def test_nothing_matching_creates_no_operation(failed, operator):
    failed(error_kind="rejected")
    with pytest.raises(Refused, match="Nothing in the dead-letter queue matches"):
        ledger_service.create_bulk(operator, "replay", DlqFilters(error_kind="timeout"))
    assert db.session.execute(sa.select(sa.func.count()).select_from(BulkOperation)).scalar_one() == 0


def test_a_failing_operation_is_marked_failed(failed, operator, monkeypatch):
    failed()
    operation = ledger_service.create_bulk(operator, "replay", DlqFilters())
    db.session.commit()
    monkeypatch.setattr(ledger_service, "run_bulk_batch", lambda *_: (_ for _ in ()).throw(RuntimeError("boom")))

    with pytest.raises(RuntimeError):
        bulk.run_bulk_operation(operation.id)

    db.session.expire_all()
    assert db.session.get(BulkOperation, operation.id).status == "failed"
    assert _actions()[-1] == "dlq.replay_all.failed"


def test_the_sweeper_restarts_an_operation_whose_job_was_lost(failed, operator):
    failed()
    operation = ledger_service.create_bulk(operator, "replay", DlqFilters())
    db.session.commit()

    assert ledger_service.resume_bulk_operations() == 1
    assert get_queue("default").get_job_ids() == [keyspace.job_id(f"bulk-{operation.id}")]
    assert ledger_service.resume_bulk_operations() == 1 and get_queue("default").count == 1  # queued: not twice
