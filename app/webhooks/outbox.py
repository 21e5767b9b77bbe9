"""The webhook outbox as a source of the delivery engine: webhook_deliveries, one event for one endpoint each.

Its re-check is short: an endpoint switched off after its event was queued holds the event (without a
try, DELIVERY_MAX_AGE counting) and checks again a minute later. Sends are recorded in groups of
RECORD_EVERY (one statement each): a worker killed mid-group posts those again after its lease
expires, with the same webhook-ids, so delivery is at least once and receivers drop the copies.
A failure is recorded at once, with the group before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from app.delivery.policy import Plan
from app.delivery.source import Batch, Claim, Recheck, Try
from app.extensions import db
from app.providers import Message, Provider
from app.webhooks import service

RECORD_EVERY = 50
DISABLED_RECHECK = timedelta(minutes=1)


class Outbox:
    """webhook_deliveries, claimed as one batch whatever their endpoints."""

    name = "outbox"
    record_every = RECORD_EVERY

    def claim(self, channel: str, ids: Sequence[int], lease_seconds: float) -> Claim | None:
        """Lease the due pending events of ids."""
        claimed = service.claim(list(ids), lease_seconds)
        return Claim(*claimed) if claimed else None

    def load(self, claim: Claim, channel) -> Batch:
        """The events with their endpoint's URL, sealed secret and switch; the context caches unsealed keys."""
        return Batch(service.claimed_batch(claim.ids), {})

    def recheck(self, batch: Batch, channel, facts: Recheck) -> Plan:
        """A switched-off endpoint's events wait; the rest go."""
        plan = Plan()
        for row in batch.rows:
            if row.enabled:
                plan.send.append(row)
            else:
                plan.hold.append((row, facts.now + DISABLED_RECHECK))
        return plan

    def write_plan(self, plan: Plan, claim: Claim, provider: str) -> None:
        """Only holds: the outbox skips and defers nothing."""
        service.postpone(db.session, [(row.id, until) for row, until in plan.hold], claim.lease)

    def render(self, row, batch: Batch, channel, provider: Provider, targets: tuple, config: Mapping) -> Message:
        """The channel signs the event's body for its endpoint."""
        return channel.build_message(row, batch.context, config, targets)

    def record(self, conn, tries: list[Try], lease: datetime) -> None:
        """A group of tries in one statement."""
        service.record_many(conn, tries, lease)

    def hold(self, conn, waits: list[tuple[int, datetime]], lease: datetime) -> None:
        """Back to pending until then, without a try."""
        service.postpone(conn, waits, lease)

    def release(self, conn, ids: list[int], lease: datetime) -> None:
        """Back to pending, due in a second, without a try."""
        service.release(conn, ids, lease)


OUTBOX = Outbox()
